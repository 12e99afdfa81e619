// Package e2e holds hoist's end-to-end tests: TestMain builds the real
// binaries (hoist, hoist-shim, hoist-runner), each test drives a real
// `hoist serve` with real Git commits against this machine's Docker Engine,
// and measurements (TestMeasure_*, behind HOIST_MEASURE=1) print figures.
//
// Nothing imports this package; its testenv sub-package is for tests only.
package e2e
