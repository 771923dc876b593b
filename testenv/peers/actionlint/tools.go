//go:build tools

// Package tools records the main package this module builds, so that
// `go mod tidy` keeps its dependencies in go.sum.
package tools

import _ "github.com/rhysd/actionlint/cmd/actionlint"
