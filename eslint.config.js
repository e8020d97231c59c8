// ESLint flat config: typescript-eslint's type-aware recommended rules. `npm run lint`; .ci/run runs it before the tests.
import js from "@eslint/js"
import globals from "globals"
import tseslint from "typescript-eslint"

export default tseslint.config(
  // examples/0*-*.ts are the spec's three examples word for word; they are run by test/package/examples.test.ts, not restyled.
  { ignores: ["dist/", "node_modules/", ".tap/", "coverage/", ".toolnexus/", "docs/api/", ".docs-check/", "examples/0*-*.ts"] },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      globals: globals.node,
      parserOptions: { project: "./tsconfig.check.json", tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      // A store or model method is async because its interface says Promise, whether or not it awaits.
      "@typescript-eslint/require-await": "off",
      // An unused argument named _x is a signature kept on purpose.
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_", caughtErrors: "none" }],
      // Passing on a rejection we did not make (a caught error: unknown; an abort reason: any in the DOM types) is allowed;
      // rejecting with a value of a known non-Error type is still an error.
      "@typescript-eslint/prefer-promise-reject-errors": ["error", { allowThrowingAny: true, allowThrowingUnknown: true }],
    },
  },
  {
    // Tests and the bench read untyped JSON answers from the wire; asserting on them is their job.
    files: ["test/**", "test-e2e/**", "bench/**"],
    rules: {
      "@typescript-eslint/no-unsafe-member-access": "off",
      "@typescript-eslint/no-unsafe-assignment": "off",
      "@typescript-eslint/no-unsafe-call": "off",
      "@typescript-eslint/no-unsafe-return": "off",
      "@typescript-eslint/no-unsafe-argument": "off",
      "@typescript-eslint/no-explicit-any": "off",
      // tap collects the promise of every t.test() itself.
      "@typescript-eslint/no-floating-promises": "off",
    },
  },
  {
    // The inspector page's browser modules, plain JS: they read untyped JSON answers from the wire, as the tests do.
    files: ["inspector/**"],
    languageOptions: { globals: globals.browser },
    rules: {
      "@typescript-eslint/no-unsafe-member-access": "off",
      "@typescript-eslint/no-unsafe-assignment": "off",
      "@typescript-eslint/no-unsafe-call": "off",
      "@typescript-eslint/no-unsafe-return": "off",
      "@typescript-eslint/no-unsafe-argument": "off",
    },
  },
)
