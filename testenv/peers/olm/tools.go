//go:build tools

// This file records the main package this module builds (OLM's olm-operator), so
// that `go mod tidy` keeps its dependencies in go.sum.
package main

import _ "github.com/operator-framework/operator-lifecycle-manager/cmd/olm"
