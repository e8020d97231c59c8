// tap's coverage map (.taprc `coverage-map`): which files each test file's coverage counts.
// test/docs/docs.test.ts writes the documentation's ts blocks into .docs-check/ and runs them there; those
// generated files are not the package's code, so that test counts coverage of the package's own sources only.
// Every other test counts tap's default set (an empty list means the default).

/** The package's code, as globs from the project root. */
const PACKAGE_CODE = ["index.ts", "lib/**/*.ts", "plugins/**/*.ts", "bin/**/*.ts"]

/**
 * @param {string} testFile the test file, relative to the project root, with "/" separators
 * @returns {string[]} the files its coverage counts: none listed means tap's default set
 */
export default function coverageMap(testFile) {
  return testFile === "test/docs/docs.test.ts" ? PACKAGE_CODE : []
}
