package deploy

import (
	"bytes"
	"encoding/base64"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/yaml"
)

// helmVersion is the Helm the chart is rendered and linted with. It comes
// from the Go module proxy, as the project's other tools do, and is built
// once into the user's cache directory.
const helmVersion = "v3.22.0"

var chartDir = filepath.Join(root, "deploy", "helm", "mcpgate")

var helmOnce struct {
	sync.Once
	path string
	err  error
}

// helmBinary returns a Helm built from helm.sh/helm/v3 at helmVersion.
func helmBinary(t *testing.T) string {
	t.Helper()
	helmOnce.Do(func() {
		cache, err := os.UserCacheDir()
		if err != nil {
			helmOnce.err = err
			return
		}
		dir := filepath.Join(cache, "mcpgate-test", "helm-"+helmVersion)
		helmOnce.path = filepath.Join(dir, "helm")
		if _, err := os.Stat(helmOnce.path); err == nil {
			return
		}
		cmd := exec.Command("go", "install", "helm.sh/helm/v3/cmd/helm@"+helmVersion)
		cmd.Env = append(os.Environ(), "GOBIN="+dir, "CGO_ENABLED=0", "GOFLAGS=")
		if out, err := cmd.CombinedOutput(); err != nil {
			helmOnce.err = &buildError{out: out, err: err}
		}
	})
	if helmOnce.err != nil {
		t.Fatalf("build helm %s: %v", helmVersion, helmOnce.err)
	}
	return helmOnce.path
}

type buildError struct {
	out []byte
	err error
}

func (e *buildError) Error() string { return e.err.Error() + ": " + string(e.out) }

// helm runs the Helm binary with a home of its own, so that no user's
// repositories or plugins take part.
func helm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	home := t.TempDir()
	cmd := exec.Command(helmBinary(t), args...)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+home, "HELM_CONFIG_HOME="+home, "HELM_DATA_HOME="+home)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), &buildError{out: stderr.Bytes(), err: err}
	}
	return string(out), nil
}

// rendered is the chart's output decoded strictly, by kind.
type rendered struct {
	deployments  []appsv1.Deployment
	statefulSets []appsv1.StatefulSet
	services     []corev1.Service
	secrets      []corev1.Secret
	accounts     []corev1.ServiceAccount
	pdbs         []policyv1.PodDisruptionBudget
	hpas         []autoscalingv2.HorizontalPodAutoscaler
	ingresses    []networkingv1.Ingress
}

// render runs helm template with the given --set values and decodes every
// object into its k8s.io/api type, failing on any field the type lacks.
func render(t *testing.T, set ...string) *rendered {
	t.Helper()
	out, err := renderRaw(t, set...)
	if err != nil {
		t.Fatalf("helm template %v: %v", set, err)
	}
	r := &rendered{}
	for _, doc := range strings.Split(out, "\n---") {
		if strings.TrimSpace(stripComments(doc)) == "" {
			continue
		}
		var head struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
			t.Fatalf("rendered document is not YAML: %v\n%s", err, doc)
		}
		switch head.APIVersion + " " + head.Kind {
		case "apps/v1 Deployment":
			r.deployments = append(r.deployments, strict[appsv1.Deployment](t, doc))
		case "apps/v1 StatefulSet":
			r.statefulSets = append(r.statefulSets, strict[appsv1.StatefulSet](t, doc))
		case "v1 Service":
			r.services = append(r.services, strict[corev1.Service](t, doc))
		case "v1 Secret":
			r.secrets = append(r.secrets, strict[corev1.Secret](t, doc))
		case "v1 ServiceAccount":
			r.accounts = append(r.accounts, strict[corev1.ServiceAccount](t, doc))
		case "policy/v1 PodDisruptionBudget":
			r.pdbs = append(r.pdbs, strict[policyv1.PodDisruptionBudget](t, doc))
		case "autoscaling/v2 HorizontalPodAutoscaler":
			r.hpas = append(r.hpas, strict[autoscalingv2.HorizontalPodAutoscaler](t, doc))
		case "networking.k8s.io/v1 Ingress":
			r.ingresses = append(r.ingresses, strict[networkingv1.Ingress](t, doc))
		default:
			t.Fatalf("rendered an object this test does not know: %s %s", head.APIVersion, head.Kind)
		}
	}
	return r
}

func renderRaw(t *testing.T, set ...string) (string, error) {
	t.Helper()
	args := []string{"template", "mcpgate", chartDir, "--namespace", "mcpgate"}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	return helm(t, args...)
}

func stripComments(doc string) string {
	var b strings.Builder
	for _, line := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "#") {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}

// strict decodes one object into T; a field T does not have, a duplicate key
// or a value of the wrong type fails the test.
func strict[T any](t *testing.T, doc string) T {
	t.Helper()
	var v T
	if err := yaml.UnmarshalStrict([]byte(doc), &v); err != nil {
		t.Fatalf("decode %T strictly: %v\n%s", v, err, doc)
	}
	return v
}

func (r *rendered) gateway(t *testing.T) appsv1.Deployment {
	t.Helper()
	if len(r.deployments) != 1 {
		t.Fatalf("rendered %d Deployments, want 1", len(r.deployments))
	}
	return r.deployments[0]
}

func (r *rendered) secret(t *testing.T, name string) corev1.Secret {
	t.Helper()
	for _, s := range r.secrets {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no Secret %s rendered", name)
	return corev1.Secret{}
}

func envOf(c corev1.Container) map[string]string {
	m := map[string]string{}
	for _, e := range c.Env {
		m[e.Name] = e.Value
	}
	return m
}

// checkGatewayPod holds for every set-up: probes, non-root, read-only root,
// the spool on an emptyDir, secrets from files, scrape annotations.
func checkGatewayPod(t *testing.T, d appsv1.Deployment) {
	t.Helper()
	spec := d.Spec.Template.Spec
	if len(spec.Containers) != 1 {
		t.Fatalf("gateway pod has %d containers, want 1", len(spec.Containers))
	}
	c := spec.Containers[0]
	probe := func(name string, p *corev1.Probe, path string) {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != path {
			t.Errorf("%s probe = %+v, want GET %s", name, p, path)
		}
	}
	probe("readiness", c.ReadinessProbe, "/readyz")
	probe("liveness", c.LivenessProbe, "/healthz")
	probe("startup", c.StartupProbe, "/readyz")

	sc := c.SecurityContext
	if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("container securityContext = %+v, want a read-only root, no privilege escalation, no capabilities", sc)
	}
	if psc := spec.SecurityContext; psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot ||
		psc.RunAsUser == nil || *psc.RunAsUser == 0 {
		t.Errorf("pod securityContext = %+v, want non-root", psc)
	}
	if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
		t.Error("the pod mounts a service account token; the gateway never calls the Kubernetes API")
	}

	env := envOf(c)
	if env["DATA_DIR"] == "" {
		t.Fatal("DATA_DIR is not set; the audit spool would go to the read-only root")
	}
	mounts := map[string]string{}
	for _, m := range c.VolumeMounts {
		mounts[m.MountPath] = m.Name
	}
	volumes := map[string]corev1.Volume{}
	for _, v := range spec.Volumes {
		volumes[v.Name] = v
	}
	if v := volumes[mounts[env["DATA_DIR"]]]; v.EmptyDir == nil {
		t.Errorf("DATA_DIR %s is on %+v, want an emptyDir", env["DATA_DIR"], v)
	}
	for _, name := range []string{"ENCRYPTION_KEY", "JWT_SECRET", "DATABASE_URL"} {
		if _, plain := env[name]; plain {
			t.Errorf("%s is in the environment; secrets come from files", name)
		}
		file := env[name+"_FILE"]
		if file == "" || mounts[filepath.Dir(file)] == "" {
			t.Errorf("%s_FILE = %q, want a path on a mounted volume", name, file)
		}
	}
	if env["PUBLIC_URL"] == "" {
		t.Error("PUBLIC_URL is not set")
	}
	if env["DATABASE_MAX_CONNS"] == "" {
		t.Error("DATABASE_MAX_CONNS is not set; the pool would follow the node's CPUs, not the pod's share")
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Errorf("resources = %+v, want cpu and memory requests and a memory limit", c.Resources)
	}
	if a := d.Spec.Template.Annotations; a["prometheus.io/scrape"] != "true" || a["prometheus.io/path"] != "/metrics" {
		t.Errorf("pod annotations = %v, want Prometheus scrape annotations for /metrics", a)
	}
}

func TestHelmChart_Defaults(t *testing.T) {
	r := render(t, "publicURL=https://mcp.example.com")
	d := r.gateway(t)
	checkGatewayPod(t, d)
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
		t.Errorf("replicas = %v, want the default 2", d.Spec.Replicas)
	}
	if len(r.statefulSets) != 1 || r.statefulSets[0].Spec.Template.Spec.Containers[0].Image != "postgres:16" {
		t.Fatalf("statefulSets = %d, want the bundled postgres:16", len(r.statefulSets))
	}
	if len(r.pdbs) != 1 || len(r.hpas) != 0 || len(r.ingresses) != 0 {
		t.Errorf("PDBs %d, HPAs %d, Ingresses %d; want 1, 0, 0 by default", len(r.pdbs), len(r.hpas), len(r.ingresses))
	}

	// Generated once: kept on uninstall, 32 random bytes for the root key.
	keys := r.secret(t, "mcpgate")
	if keys.Annotations["helm.sh/resource-policy"] != "keep" {
		t.Error("the generated ENCRYPTION_KEY Secret is deleted on uninstall")
	}
	raw, err := base64.StdEncoding.DecodeString(string(keys.Data["ENCRYPTION_KEY"]))
	if err != nil || len(raw) != 32 {
		t.Errorf("ENCRYPTION_KEY decodes to %d bytes (err %v), want 32", len(raw), err)
	}
	if len(keys.Data["JWT_SECRET"]) < 32 {
		t.Errorf("JWT_SECRET has %d bytes, want at least 32", len(keys.Data["JWT_SECRET"]))
	}
	db := r.secret(t, "mcpgate-database")
	url := string(db.Data["DATABASE_URL"])
	if !strings.HasPrefix(url, "postgres://mcpgate:") || !strings.Contains(url, "@mcpgate-postgresql:5432/mcpgate") ||
		!strings.Contains(url, string(db.Data["POSTGRES_PASSWORD"])) || len(db.Data["POSTGRES_PASSWORD"]) < 24 {
		t.Errorf("DATABASE_URL does not point at the bundled PostgreSQL with its generated password")
	}
	second := render(t, "publicURL=https://mcp.example.com")
	if bytes.Equal(second.secret(t, "mcpgate").Data["ENCRYPTION_KEY"], keys.Data["ENCRYPTION_KEY"]) {
		t.Error("two renders without a cluster gave the same ENCRYPTION_KEY; it is not random")
	}
}

// TestHelmChart_ThreeReplicasExternalDatabase is the set-up of an install
// that outgrew one machine: three replicas on a managed PostgreSQL, an
// ingress with TLS, secrets managed outside the chart.
func TestHelmChart_ThreeReplicasExternalDatabase(t *testing.T) {
	r := render(t,
		"publicURL=https://mcp.example.com",
		"replicaCount=3",
		"externalDatabase.existingSecret=mcpgate-db",
		"secrets.existingSecret=mcpgate-keys",
		"ingress.enabled=true",
		"ingress.className=nginx",
		"ingress.tlsSecretName=mcp-tls",
		"trustedProxies=10.0.0.0/8",
		"autoscaling.enabled=true",
		"autoscaling.minReplicas=3",
	)
	d := r.gateway(t)
	checkGatewayPod(t, d)
	if d.Spec.Replicas != nil {
		t.Errorf("replicas = %d with autoscaling on; the HPA owns the count", *d.Spec.Replicas)
	}
	if len(r.hpas) != 1 || r.hpas[0].Spec.MinReplicas == nil || *r.hpas[0].Spec.MinReplicas != 3 {
		t.Fatalf("HPAs = %+v, want one with at least 3 replicas", r.hpas)
	}
	if len(r.statefulSets) != 0 || len(r.secrets) != 0 {
		t.Errorf("rendered %d StatefulSets and %d Secrets; an external database and existing secrets need none",
			len(r.statefulSets), len(r.secrets))
	}
	env := envOf(d.Spec.Template.Spec.Containers[0])
	if env["TRUSTED_PROXIES"] != "10.0.0.0/8" || env["PUBLIC_URL"] != "https://mcp.example.com" {
		t.Errorf("TRUSTED_PROXIES = %q, PUBLIC_URL = %q", env["TRUSTED_PROXIES"], env["PUBLIC_URL"])
	}
	var sources []string
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Projected != nil {
			for _, s := range v.Projected.Sources {
				sources = append(sources, s.Secret.Name)
			}
		}
	}
	if !slices.Equal(sources, []string{"mcpgate-keys", "mcpgate-db"}) {
		t.Errorf("secret files come from %v, want the existing Secrets mcpgate-keys and mcpgate-db", sources)
	}
	if len(r.ingresses) != 1 {
		t.Fatalf("rendered %d Ingresses, want 1", len(r.ingresses))
	}
	ing := r.ingresses[0]
	if ing.Spec.Rules[0].Host != "mcp.example.com" || len(ing.Spec.TLS) != 1 || ing.Spec.TLS[0].SecretName != "mcp-tls" {
		t.Errorf("ingress = %+v, want publicURL's host with TLS from mcp-tls", ing.Spec)
	}
	if len(r.pdbs) != 1 || r.pdbs[0].Spec.MaxUnavailable.IntValue() != 1 {
		t.Errorf("PDBs = %+v, want one allowing one pod down", r.pdbs)
	}
}

// TestHelmChart_Refusals: values that would make a broken or unsafe install
// are refused at render time with a message naming what to set.
func TestHelmChart_Refusals(t *testing.T) {
	tests := []struct {
		name string
		set  []string
		want string
	}{
		{"no public URL", nil, "set publicURL"},
		{"ingress without trusted proxies", []string{"publicURL=https://a.example", "ingress.enabled=true"}, "trustedProxies"},
		{"no database at all", []string{"publicURL=https://a.example", "postgresql.enabled=false"}, "externalDatabase.url"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := renderRaw(t, tt.set...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("helm template err = %v, want a refusal naming %q", err, tt.want)
			}
		})
	}
}

func TestHelmChart_Lint(t *testing.T) {
	out, err := helm(t, "lint", chartDir, "--strict", "--set", "publicURL=https://mcp.example.com")
	if err != nil {
		t.Fatalf("helm lint: %v\n%s", err, out)
	}
}
