// The SDK's lint rules: eslint's and typescript-eslint's recommended sets over the hand-written
// sources and the node tests. `./loom lint` runs it; dist/ is tsc's output and src/generated/
// is scripts/gen_ts.py's, so neither is linted here.
import js from "@eslint/js";
import tseslint from "typescript-eslint";

export default tseslint.config(
  { ignores: ["dist/", "node_modules/", "src/generated/"] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      // `_`-named bindings are the ones a destructuring or a loop must name but does not use.
      "@typescript-eslint/no-unused-vars": ["error", { varsIgnorePattern: "^_", argsIgnorePattern: "^_" }],
      // `interface Loom extends Omit<…> {}` types the generated groups the constructor assigns.
      "@typescript-eslint/no-empty-object-type": ["error", { allowInterfaces: "with-single-extends" }],
    },
  },
  {
    files: ["test/**/*.js", "eslint.config.js"],
    languageOptions: {
      globals: {
        process: "readonly",
        console: "readonly",
        setTimeout: "readonly",
        setImmediate: "readonly",
        clearTimeout: "readonly",
        URL: "readonly",
        Buffer: "readonly",
        fetch: "readonly",
        AbortController: "readonly",
        TextEncoder: "readonly",
        TextDecoder: "readonly",
      },
    },
  },
);
