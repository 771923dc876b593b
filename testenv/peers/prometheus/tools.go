//go:build tools

// Package tools records the main packages this module builds, so that
// `go mod tidy` keeps their dependencies in go.sum.
package tools

import (
	_ "github.com/prometheus/prometheus/cmd/prometheus"
	_ "github.com/prometheus/prometheus/cmd/promtool"
)
