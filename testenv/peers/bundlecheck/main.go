// Command bundlecheck validates an OLM bundle directory with the
// operator-framework's own validators: the default bundle suite (CSV, CRD,
// bundle), the operatorhub suite as operator-sdk runs it today (operatorhub/v2,
// standard capabilities, standard categories: the split of the deprecated
// "operatorhub" validator, which would only add a deprecation warning), plus the
// good-practices and object checks.
//
//	bundlecheck [-k8s-version 1.35.0] [-strict] BUNDLE_DIR
//
// It prints one line per finding and exits 1 on any error (with -strict, on
// any warning too), 2 when the bundle cannot be loaded at all.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/operator-framework/api/pkg/manifests"
	"github.com/operator-framework/api/pkg/validation"
	validator "github.com/operator-framework/api/pkg/validation/interfaces"
)

func main() {
	k8sVersion := flag.String("k8s-version", "", "Kubernetes version the removed-API checks are made against")
	strict := flag.Bool("strict", false, "treat warnings as failures")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: bundlecheck [-k8s-version X.Y.Z] [-strict] BUNDLE_DIR")
		os.Exit(2)
	}
	dir := flag.Arg(0)

	// The loader reads manifests/ and metadata/ below the bundle root; the
	// annotations give the channels the operatorhub suite looks at.
	bundle, err := manifests.GetBundleFromDir(filepath.Clean(dir))
	if err != nil {
		fmt.Fprintf(os.Stderr, "bundlecheck: cannot load the bundle in %s: %v\n", dir, err)
		os.Exit(2)
	}

	suite := validator.Validators{}.WithValidators(validation.DefaultBundleValidators...).WithValidators(
		validation.OperatorHubV2Validator,
		validation.StandardCapabilitiesValidator,
		validation.StandardCategoriesValidator,
		validation.GoodPracticesValidator,
		validation.ObjectValidator,
	)
	objs := bundle.ObjectsToValidate()
	if *k8sVersion != "" {
		objs = append(objs, map[string]string{"k8s-version": *k8sVersion})
	}

	var lines []string
	failed := false
	for _, result := range suite.Validate(objs...) {
		for _, e := range result.Errors {
			lines = append(lines, fmt.Sprintf("%s (%s)", e.Error(), result.Name))
			failed = true
		}
		for _, w := range result.Warnings {
			lines = append(lines, fmt.Sprintf("%s (%s)", w.Error(), result.Name))
			if *strict {
				failed = true
			}
		}
	}
	sort.Strings(lines)
	for _, l := range lines {
		fmt.Println(l)
	}
	if failed {
		os.Exit(1)
	}
	fmt.Printf("bundlecheck: %s is valid (%d validators)\n", bundle.Name, len(suite))
}
