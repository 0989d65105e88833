// Package shape holds the tests of the module's shape, which a reader of
// the code meets first: no type does two jobs (at most 25 methods, its
// embedded types' included), the layers point one way (the wire and the
// scheduler never depend on the package that reads the settings), and no
// page under docs/ runs past 500 lines.
package shape
