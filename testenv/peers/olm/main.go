// Command olmsteps prints, as a JSON List, the ServiceAccounts, Roles, RoleBindings,
// ClusterRoles and ClusterRoleBindings that OLM's catalog-operator would create for a
// ClusterServiceVersion when it executes an InstallPlan: they come from OLM's own
// resolver (RBACForClusterServiceVersion), with the olm.managed label the InstallPlan
// step adds. olm-operator does not create them itself; it only checks that they grant
// what the CSV asks before it deploys.
//
//	olmsteps < csv.json      # the CSV as the API server holds it (namespace, uid)
//
// Used where no catalog can run (kwok Pods run no registry server), so that a CSV
// applied directly gets the objects OLM would have made, not a hand-written copy.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"

	"github.com/operator-framework/api/pkg/operators/v1alpha1"
	"github.com/operator-framework/operator-lifecycle-manager/pkg/controller/install"
	"github.com/operator-framework/operator-lifecycle-manager/pkg/controller/registry/resolver"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func main() {
	raw, err := io.ReadAll(os.Stdin)
	if err != nil {
		fail("cannot read the CSV from stdin: %v", err)
	}
	var csv v1alpha1.ClusterServiceVersion
	if err := json.Unmarshal(raw, &csv); err != nil {
		fail("stdin is not a ClusterServiceVersion: %v", err)
	}
	if csv.GetUID() == "" {
		fail("CSV %s/%s has no uid: give the CSV as the API server holds it", csv.GetNamespace(), csv.GetName())
	}
	perms, err := resolver.RBACForClusterServiceVersion(&csv)
	if err != nil {
		fail("OLM cannot derive the RBAC of CSV %s: %v", csv.GetName(), err)
	}
	accounts := make([]string, 0, len(perms))
	for name := range perms {
		accounts = append(accounts, name)
	}
	sort.Strings(accounts)
	var items []any
	add := func(obj metav1.Object, kind, apiVersion string) {
		labels := obj.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		labels[install.OLMManagedLabelKey] = install.OLMManagedLabelValue
		obj.SetLabels(labels)
		items = append(items, typed{obj, metav1.TypeMeta{Kind: kind, APIVersion: apiVersion}})
	}
	const rbac = "rbac.authorization.k8s.io/v1"
	for _, name := range accounts {
		p := perms[name]
		// The InstallPlan puts the ServiceAccount in the CSV's namespace.
		p.ServiceAccount.SetNamespace(csv.GetNamespace())
		add(p.ServiceAccount, "ServiceAccount", "v1")
		for _, r := range p.Roles {
			add(r, "Role", rbac)
		}
		for _, r := range p.RoleBindings {
			add(r, "RoleBinding", rbac)
		}
		for _, r := range p.ClusterRoles {
			add(r, "ClusterRole", rbac)
		}
		for _, r := range p.ClusterRoleBindings {
			r.SetNamespace("") // cluster-scoped: the resolver's namespace is meaningless
			add(r, "ClusterRoleBinding", rbac)
		}
	}
	out := map[string]any{"apiVersion": "v1", "kind": "List", "items": items}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		fail("cannot write: %v", err)
	}
}

// typed marshals an object with its kind and apiVersion, which Go types leave empty.
type typed struct {
	obj  metav1.Object
	meta metav1.TypeMeta
}

func (t typed) MarshalJSON() ([]byte, error) {
	body, err := json.Marshal(t.obj)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, err
	}
	m["kind"], m["apiVersion"] = t.meta.Kind, t.meta.APIVersion
	return json.Marshal(m)
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "olmsteps: "+format+"\n", args...)
	os.Exit(2)
}
