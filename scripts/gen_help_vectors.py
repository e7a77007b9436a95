"""Compute the docs sections' embeddings help ships (services/help/loom_help/section_vectors.npz).

Run after editing docs/: only passages the table lacks are embedded (a few seconds for an edited
page), passages no page has any more are dropped, and a table from another model is computed
again. `--check` exits 1 when the table does not hold exactly the current passages of the
current model (the tests run it); it loads no model.
"""

from __future__ import annotations

import argparse
import sys

from loom_core.embedding import MODEL_ID, shared_local_model
from loom_help.domain import hybrid
from loom_help.service.help import EMBED_CHUNK, build_index
from loom_help.store import section_vectors
from loom_help.store.pages import read_pages, shipped_docs_dir


def current_passages() -> dict[str, str]:
    index = build_index(read_pages(shipped_docs_dir()))
    return {section_vectors.passage_key(p): p for p in (hybrid.passage(index, s) for s in index.sections)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the shipped table is out of date")
    args = parser.parse_args(argv)
    path = section_vectors.shipped_path()
    passages = current_passages()
    stored = section_vectors.load(MODEL_ID, path)
    missing = [k for k in passages if k not in stored]
    extra = [k for k in stored if k not in passages]
    if args.check:
        if missing or extra:
            print(
                f"out of date: {path.name}: {len(missing)} passages not embedded, {len(extra)} no page has: "
                "run python scripts/gen_help_vectors.py",
                file=sys.stderr,
            )
            return 1
        return 0
    model = shared_local_model()
    kept = {k: v for k, v in stored.items() if k in passages}
    for at in range(0, len(missing), EMBED_CHUNK):
        chunk = missing[at : at + EMBED_CHUNK]
        kept.update(zip(chunk, model.encode([passages[k] for k in chunk]), strict=True))
    section_vectors.save(path, MODEL_ID, kept)
    print(f"wrote {path.name}: {len(kept)} sections ({len(missing)} embedded, {len(extra)} dropped)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
