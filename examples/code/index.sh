# A checkout of acme/widgets (made here; use your own), indexed into the repository's trunk code namespace.
set -eu
checkout="$(mktemp -d)"
mkdir -p "$checkout/src"
printf 'class PartStore:\n    def load(self) -> None:\n        pass\n' > "$checkout/src/store.py"
git -C "$checkout" init -q
git -C "$checkout" add src/store.py
git -C "$checkout" -c user.email=you@example.com -c user.name=you commit -qm "first"
git -C "$checkout" remote add origin git@github.com:acme/widgets.git

loom code index --org "$LOOM_ORG" --repo acme/widgets --path "$checkout"

# Which repository a checkout's remote names (any URL form), and where a name is defined in its trunk.
curl -sf -X POST "$LOOM_URL/v1/code.repos" -H "Authorization: Bearer $LOOM_TOKEN" \
  -H "Content-Type: application/json" -d '{"remote": "https://github.com/acme/widgets.git"}'
curl -sf -X POST "$LOOM_URL/v1/code.symbol" -H "Authorization: Bearer $LOOM_TOKEN" \
  -H "X-Loom-Namespace: code-acme-widgets" -H "Content-Type: application/json" -d '{"name": "PartStore"}'
