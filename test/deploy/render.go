// render: a small stand-in for `helm template` + `helm lint --strict`, for machines without helm.
//
// It loads a chart (Chart.yaml, values.yaml, templates/), merges values files over the defaults
// the way helm does, and renders every template with Go's text/template, sprig's functions and
// helm's own (include, tpl, required, toYaml, fromYaml, toJson, fromJson, lookup), then writes
// the manifests to stdout as `helm template` does ("---" and "# Source:" before each). It is
// stricter than helm where helm is silent: a key missing from the values is an error (helm lint
// --strict), so is "<no value>" in the output, a document that is not YAML, an object without
// apiVersion, kind or a valid metadata.name, and the same object twice.
//
// Build (GOPATH mode, Debian's packaged sources, no network):
//
//	GO111MODULE=off GOPATH=/usr/share/gocode go build -o render test/deploy/render.go
//
// Use: render -chart helm/walc [-f values.yaml]... [-extra file.yaml]... [-notes]
//
//	[-values-json merged.json]   (for checking values.schema.json, as helm does)
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"text/template"

	"github.com/Masterminds/semver"
	"github.com/Masterminds/sprig"
	yaml2 "gopkg.in/yaml.v2"
	yaml3 "gopkg.in/yaml.v3"
)

// Chart.yaml's fields as helm exposes them to templates (.Chart.Name, .Chart.AppVersion, ...).
type chartMeta struct {
	APIVersion  string   `yaml:"apiVersion"`
	Name        string   `yaml:"name"`
	Version     string   `yaml:"version"`
	AppVersion  string   `yaml:"appVersion"`
	KubeVersion string   `yaml:"kubeVersion"`
	Description string   `yaml:"description"`
	Type        string   `yaml:"type"`
	Keywords    []string `yaml:"keywords"`
	Home        string   `yaml:"home"`
	Sources     []string `yaml:"sources"`
	Deprecated  bool     `yaml:"deprecated"`
}

type release struct {
	Name      string
	Namespace string
	Service   string
	IsInstall bool
	IsUpgrade bool
	Revision  int
}

type kubeVersion struct {
	Version    string
	Major      string
	Minor      string
	GitVersion string
}

type apiVersions []string

// Has is helm's .Capabilities.APIVersions.Has.
func (a apiVersions) Has(v string) bool {
	for _, x := range a {
		if x == v {
			return true
		}
	}
	return false
}

type capabilities struct {
	KubeVersion kubeVersion
	APIVersions apiVersions
}

type templateInfo struct {
	Name     string
	BasePath string
}

type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

func die(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, "render: "+format+"\n", args...)
	os.Exit(1)
}

// normalize turns yaml.v3's decoded values into what helm's templates see (maps of strings).
func normalize(v interface{}) interface{} {
	switch x := v.(type) {
	case map[string]interface{}:
		for k, e := range x {
			x[k] = normalize(e)
		}
		return x
	case map[interface{}]interface{}:
		m := map[string]interface{}{}
		for k, e := range x {
			m[fmt.Sprint(k)] = normalize(e)
		}
		return m
	case []interface{}:
		for i, e := range x {
			x[i] = normalize(e)
		}
		return x
	}
	return v
}

// asHelm gives decoded YAML the types helm's values have: helm reads YAML through JSON
// (sigs.k8s.io/yaml), so every number is a float64, and {{ 2592000 }} prints 2.592e+06 unless
// the template converts it (int64) first. The renderer must show that, not hide it.
func asHelm(v interface{}) (map[string]interface{}, error) {
	j, err := json.Marshal(normalize(v))
	if err != nil {
		return nil, err
	}
	m := map[string]interface{}{}
	if err := json.Unmarshal(j, &m); err != nil {
		return nil, err
	}
	return m, nil
}

func readYAMLMap(path string) map[string]interface{} {
	data, err := os.ReadFile(path)
	if err != nil {
		die("%v", err)
	}
	var v interface{}
	if err := yaml3.Unmarshal(data, &v); err != nil {
		die("%s: %v", path, err)
	}
	if v == nil {
		return map[string]interface{}{}
	}
	m, err := asHelm(v)
	if err != nil {
		die("%s: %v", path, err)
	}
	return m
}

// coalesce merges src over dst as helm merges a values file over the chart's values: maps
// merge key by key, anything else replaces, and null deletes the key.
func coalesce(dst, src map[string]interface{}) map[string]interface{} {
	for k, v := range src {
		if v == nil {
			delete(dst, k)
			continue
		}
		sm, sok := v.(map[string]interface{})
		dm, dok := dst[k].(map[string]interface{})
		if sok && dok {
			dst[k] = coalesce(dm, sm)
		} else {
			dst[k] = v
		}
	}
	return dst
}

// toYAML is helm's toYaml: JSON first (so keys sort and types are JSON's), then YAML, without
// the final newline.
func toYAML(v interface{}) string {
	j, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	var ms yaml2.MapSlice
	var out []byte
	if err := yaml2.Unmarshal(j, &ms); err == nil && len(j) > 0 && j[0] == '{' {
		out, err = yaml2.Marshal(ms)
		if err != nil {
			return ""
		}
	} else {
		var any interface{}
		if err := yaml2.Unmarshal(j, &any); err != nil {
			return ""
		}
		out, err = yaml2.Marshal(any)
		if err != nil {
			return ""
		}
	}
	return strings.TrimSuffix(string(out), "\n")
}

func funcMap(root **template.Template) template.FuncMap {
	f := sprig.TxtFuncMap()
	delete(f, "env")
	delete(f, "expandenv")
	depth := map[string]int{}
	f["include"] = func(name string, data interface{}) (string, error) {
		if depth[name] > 100 {
			return "", fmt.Errorf("include %q: recursion too deep", name)
		}
		depth[name]++
		defer func() { depth[name]-- }()
		var buf bytes.Buffer
		if err := (*root).ExecuteTemplate(&buf, name, data); err != nil {
			return "", err
		}
		return buf.String(), nil
	}
	f["tpl"] = func(text string, data interface{}) (string, error) {
		t, err := (*root).Clone()
		if err != nil {
			return "", err
		}
		t, err = t.New("tpl").Parse(text)
		if err != nil {
			return "", err
		}
		var buf bytes.Buffer
		err = t.Execute(&buf, data)
		return buf.String(), err
	}
	f["required"] = func(msg string, v interface{}) (interface{}, error) {
		if v == nil {
			return nil, errors.New(msg)
		}
		if s, ok := v.(string); ok && s == "" {
			return nil, errors.New(msg)
		}
		return v, nil
	}
	f["toYaml"] = toYAML
	f["toJson"] = func(v interface{}) string {
		b, err := json.Marshal(v)
		if err != nil {
			return ""
		}
		return string(b)
	}
	f["fromYaml"] = func(s string) map[string]interface{} {
		var v interface{}
		err := yaml3.Unmarshal([]byte(s), &v)
		var m map[string]interface{}
		if err == nil {
			m, err = asHelm(v)
		}
		if err != nil {
			m = map[string]interface{}{"Error": err.Error()}
		}
		return m
	}
	f["fromJson"] = func(s string) map[string]interface{} {
		m := map[string]interface{}{}
		if err := json.Unmarshal([]byte(s), &m); err != nil {
			m["Error"] = err.Error()
		}
		return m
	}
	// No cluster: lookup finds nothing, as under `helm template`.
	f["lookup"] = func(apiVersion, kind, namespace, name string) (map[string]interface{}, error) {
		return map[string]interface{}{}, nil
	}
	return f
}

var (
	dns1123Subdomain = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
	labelValue       = regexp.MustCompile(`^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`)
)

// checkObject is the part of helm lint (and of the API server's admission) that needs no
// schema: identity, names, label values.
func checkObject(src string, doc map[string]interface{}) (string, error) {
	av, _ := doc["apiVersion"].(string)
	kind, _ := doc["kind"].(string)
	md, _ := doc["metadata"].(map[string]interface{})
	if av == "" || kind == "" || md == nil {
		return "", fmt.Errorf("%s: object without apiVersion, kind or metadata", src)
	}
	name, _ := md["name"].(string)
	if name == "" || len(name) > 253 || !dns1123Subdomain.MatchString(name) {
		return "", fmt.Errorf("%s: %s has an invalid metadata.name %q", src, kind, name)
	}
	if kind == "CronJob" && len(name) > 52 {
		return "", fmt.Errorf("%s: CronJob name %q is longer than 52 characters", src, name)
	}
	var labels []map[string]interface{}
	if l, ok := md["labels"].(map[string]interface{}); ok {
		labels = append(labels, l)
	}
	for _, l := range labels {
		for k, v := range l {
			s, ok := v.(string)
			if !ok || len(s) > 63 || !labelValue.MatchString(s) {
				return "", fmt.Errorf("%s: label %s has an invalid value %v", src, k, v)
			}
		}
	}
	return kind + "/" + name, nil
}

func main() {
	var valueFiles, extras stringList
	chartDir := flag.String("chart", "helm/walc", "chart directory")
	relName := flag.String("name", "walc", "release name")
	namespace := flag.String("namespace", "default", "release namespace")
	kube := flag.String("kube-version", "v1.27.1", "Kubernetes version for .Capabilities")
	notes := flag.Bool("notes", false, "also print the rendered NOTES.txt to stderr")
	valuesOut := flag.String("values-json", "", "also write the merged values, as JSON, to this file")
	flag.Var(&valueFiles, "f", "values file merged over the chart's values.yaml (repeatable)")
	flag.Var(&extras, "extra", "extra template rendered with the chart's templates (repeatable)")
	flag.Parse()

	// Chart.yaml, as helm lint checks it.
	var meta chartMeta
	data, err := os.ReadFile(filepath.Join(*chartDir, "Chart.yaml"))
	if err != nil {
		die("%v", err)
	}
	if err := yaml3.Unmarshal(data, &meta); err != nil {
		die("Chart.yaml: %v", err)
	}
	if meta.APIVersion != "v2" {
		die("Chart.yaml: apiVersion must be v2, is %q", meta.APIVersion)
	}
	if meta.Name == "" || meta.Name != filepath.Base(filepath.Clean(*chartDir)) {
		die("Chart.yaml: name %q must be the chart directory's name", meta.Name)
	}
	if _, err := semver.StrictNewVersion(meta.Version); err != nil {
		die("Chart.yaml: version %q is not SemVer 2: %v", meta.Version, err)
	}
	kv, err := semver.NewVersion(*kube)
	if err != nil {
		die("-kube-version: %v", err)
	}
	if meta.KubeVersion != "" {
		c, err := semver.NewConstraint(meta.KubeVersion)
		if err != nil {
			die("Chart.yaml: kubeVersion: %v", err)
		}
		if !c.Check(kv) {
			die("Chart.yaml: kubeVersion %s excludes %s", meta.KubeVersion, *kube)
		}
	}

	values := readYAMLMap(filepath.Join(*chartDir, "values.yaml"))
	for _, f := range valueFiles {
		values = coalesce(values, readYAMLMap(f))
	}
	if *valuesOut != "" {
		// What helm validates against values.schema.json: the merged values.
		j, err := json.MarshalIndent(values, "", "  ")
		if err == nil {
			err = os.WriteFile(*valuesOut, append(j, '\n'), 0o644)
		}
		if err != nil {
			die("-values-json: %v", err)
		}
	}

	// Every file under templates/ is parsed into one set, so any file's `define` is visible to
	// all; files whose name starts with "_" only define, NOTES.txt is not a manifest.
	var root *template.Template
	root = template.New(meta.Name).Funcs(funcMap(&root)).Option("missingkey=error")
	var render []string
	notesName := ""
	tdir := filepath.Join(*chartDir, "templates")
	err = filepath.Walk(tdir, func(path string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(*chartDir, path)
		name := meta.Name + "/" + filepath.ToSlash(rel)
		base := filepath.Base(path)
		ext := filepath.Ext(base)
		if ext != ".yaml" && ext != ".yml" && ext != ".tpl" && ext != ".txt" && ext != ".json" {
			return fmt.Errorf("%s: helm renders it, but it is not .yaml, .tpl or .txt", rel)
		}
		text, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if _, err := root.New(name).Parse(string(text)); err != nil {
			return err
		}
		switch {
		case base == "NOTES.txt":
			notesName = name
		case strings.HasPrefix(base, "_"):
		default:
			render = append(render, name)
		}
		return nil
	})
	if err != nil {
		die("%v", err)
	}
	for _, e := range extras {
		text, err := os.ReadFile(e)
		if err != nil {
			die("%v", err)
		}
		name := meta.Name + "/templates/" + filepath.Base(e)
		if _, err := root.New(name).Parse(string(text)); err != nil {
			die("%v", err)
		}
		render = append(render, name)
	}
	sort.Strings(render)

	top := map[string]interface{}{
		"Values": values,
		"Chart":  meta,
		"Release": release{Name: *relName, Namespace: *namespace, Service: "Helm",
			IsInstall: true, Revision: 1},
		"Capabilities": capabilities{
			KubeVersion: kubeVersion{Version: *kube, Major: fmt.Sprint(kv.Major()),
				Minor: fmt.Sprint(kv.Minor()), GitVersion: *kube},
			APIVersions: apiVersions{"v1", "apps/v1", "batch/v1", "policy/v1",
				"rbac.authorization.k8s.io/v1", "networking.k8s.io/v1"},
		},
		"Files": map[string]interface{}{},
	}
	exec := func(name string) string {
		top["Template"] = templateInfo{Name: name, BasePath: meta.Name + "/templates"}
		var buf bytes.Buffer
		if err := root.ExecuteTemplate(&buf, name, top); err != nil {
			die("%v", err)
		}
		out := buf.String()
		if strings.Contains(out, "<no value>") {
			die("%s: renders \"<no value>\" (a nil value printed)", name)
		}
		return out
	}

	type manifest struct {
		kind, text string
	}
	var manifests []manifest
	seen := map[string]string{}
	for _, name := range render {
		text := exec(name)
		for _, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(text, -1) {
			body := strings.TrimSpace(doc)
			if body == "" {
				continue
			}
			var parsed interface{}
			dec := yaml3.NewDecoder(strings.NewReader(doc))
			if err := dec.Decode(&parsed); err != nil {
				die("%s: not YAML: %v\n%s", name, err, doc)
			}
			if parsed == nil {
				continue // comments only
			}
			obj, ok := normalize(parsed).(map[string]interface{})
			if !ok {
				die("%s: a document that is not a mapping", name)
			}
			id, err := checkObject(name, obj)
			if err != nil {
				die("%v", err)
			}
			if prev, dup := seen[id]; dup {
				die("%s: %s already rendered by %s", name, id, prev)
			}
			seen[id] = name
			manifests = append(manifests, manifest{obj["kind"].(string),
				fmt.Sprintf("---\n# Source: %s\n%s\n", name, strings.TrimRight(strings.TrimLeft(doc, "\n"), "\n "))})
		}
	}
	// helm's install order (releaseutil.InstallOrder), unknown kinds last.
	order := map[string]int{}
	for i, k := range strings.Fields(`Namespace NetworkPolicy ResourceQuota LimitRange
		PodSecurityPolicy PodDisruptionBudget ServiceAccount Secret SecretList ConfigMap
		StorageClass PersistentVolume PersistentVolumeClaim CustomResourceDefinition ClusterRole
		ClusterRoleList ClusterRoleBinding ClusterRoleBindingList Role RoleList RoleBinding
		RoleBindingList Service DaemonSet Pod ReplicationController ReplicaSet Deployment
		HorizontalPodAutoscaler StatefulSet Job CronJob IngressClass Ingress APIService`) {
		order[k] = i + 1
	}
	rank := func(k string) int {
		if r, ok := order[k]; ok {
			return r
		}
		return len(order) + 1
	}
	sort.SliceStable(manifests, func(i, j int) bool {
		return rank(manifests[i].kind) < rank(manifests[j].kind)
	})
	var out strings.Builder
	for _, m := range manifests {
		out.WriteString(m.text)
	}
	if notesName != "" {
		n := exec(notesName)
		if *notes {
			fmt.Fprint(os.Stderr, n)
		}
	}
	fmt.Print(out.String())
}
