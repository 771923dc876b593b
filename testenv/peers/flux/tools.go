//go:build tools

// Package tools records the main packages this module builds, so that
// `go mod tidy` keeps their dependencies in go.sum.
package tools

import (
	_ "github.com/fluxcd/flux2/v2/cmd/flux"
	_ "github.com/fluxcd/kustomize-controller"
	_ "github.com/fluxcd/source-controller"
)
