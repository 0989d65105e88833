// Package semconvtest stands in for the contrib package of that name, which
// only the k8sattributes processor's own tests import. The Collector Builder
// runs go mod tidy, which resolves the imports of those tests too, and the
// module proxy this project builds from does not serve the real module's
// v0.165.x release; nothing in otelcol-tt compiles this package.
package semconvtest
