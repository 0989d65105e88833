// Package shape holds the tests of the module's shape, which a reader of
// the code meets first: no type does two jobs (at most 25 methods, its
// embedded types' included), and the layers point one way (the wire and
// the scheduler never depend on the package that reads the settings).
package shape
