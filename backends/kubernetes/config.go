package kubernetes

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Defaults of a `kubernetes` entry.
const (
	// DefaultNamespace is where the driver's objects go when neither the
	// entry nor the kubeconfig context names a namespace (dstack's
	// default).
	DefaultNamespace = "default"
	// DefaultUnschedulableTimeout is how long a task's pod may stay
	// unschedulable before the task ends as no capacity: dstack waits 10 s
	// for a job's pod to be scheduled
	// (src/dstack/_internal/core/backends/kubernetes/compute.py).
	DefaultUnschedulableTimeout = 10 * time.Second
	// inClusterRegion is the region of a cluster reached with the pod's
	// service account (no kubeconfig, so no context name).
	inClusterRegion = "in-cluster"
)

// Options are the settings of a `kubernetes` entry in the server's config
// file. They accept dstack's kubernetes backend entry unchanged
// (src/dstack/_internal/core/backends/kubernetes/models.py: `kubeconfig`,
// `namespace`, `proxy_jump`, or `contexts` with one context) plus hoist's
// `price` and `unschedulable_timeout`.
type Options struct {
	// Kubeconfig is the kubeconfig to use; absent means the in-cluster
	// configuration of the pod the server runs in.
	Kubeconfig *KubeconfigOptions `json:"kubeconfig"`
	// Contexts names the kubeconfig context to use (dstack's `contexts`:
	// a name or {name, proxy_jump}); hoist drives one context per backend
	// entry, so at most one is accepted. Empty means the current context.
	Contexts []ContextOptions `json:"contexts"`
	// Namespace is where every object hoist creates goes, created when
	// missing; default the context's namespace, else "default".
	Namespace string `json:"namespace"`
	// ProxyJump is dstack's SSH jump host to the cluster's nodes. It is
	// accepted and not needed: hoist reaches pods through the API server.
	ProxyJump *ProxyJumpOptions `json:"proxy_jump"`
	// Price prices the slices of nodes offered (USD per hour); zero by
	// default.
	Price PriceOptions `json:"price"`
	// UnschedulableTimeout is how long a task's pod may stay unschedulable
	// before the task fails for want of capacity (a Go duration such as
	// "30s"); default DefaultUnschedulableTimeout.
	UnschedulableTimeout string `json:"unschedulable_timeout"`
}

// KubeconfigOptions is dstack's `kubeconfig: {filename | data}`.
type KubeconfigOptions struct {
	// Filename is the path of a kubeconfig file on the server ("~/" is
	// the home directory).
	Filename string `json:"filename"`
	// Data is the kubeconfig's content; it wins over Filename.
	Data string `json:"data"`
}

// ContextOptions is one entry of dstack's `contexts`.
type ContextOptions struct {
	// Name is the kubeconfig context's name.
	Name string `json:"name"`
	// ProxyJump is accepted as the entry-level one (not needed).
	ProxyJump *ProxyJumpOptions `json:"proxy_jump"`
}

// UnmarshalJSON accepts a context as a bare name or as {name, proxy_jump}.
func (c *ContextOptions) UnmarshalJSON(b []byte) error {
	var name string
	if err := jsonUnmarshalStrict(b, &name); err == nil {
		*c = ContextOptions{Name: name}
		return nil
	}
	type plain ContextOptions
	var p plain
	if err := jsonUnmarshalStrict(b, &p); err != nil {
		return fmt.Errorf("context: want a name or {name, proxy_jump}: %w", err)
	}
	*c = ContextOptions(p)
	return nil
}

// ProxyJumpOptions is dstack's `proxy_jump: {hostname, port}`.
type ProxyJumpOptions struct {
	// Hostname is the jump host's address.
	Hostname string `json:"hostname"`
	// Port is the jump host's SSH port (a NodePort in dstack).
	Port int `json:"port"`
}

// PriceOptions price a slice of a node: the offer's price is the sum of
// its vCPUs, memory and GPUs at these rates.
type PriceOptions struct {
	// CPU is USD per hour per vCPU.
	CPU float64 `json:"cpu"`
	// Memory is USD per hour per GiB of memory.
	Memory float64 `json:"memory"`
	// GPU is USD per hour per GPU.
	GPU float64 `json:"gpu"`
}

// of returns the price of a slice of cpus vCPUs, memGB GiB and gpus GPUs.
func (p PriceOptions) of(cpus int, memGB float64, gpus int) float64 {
	return float64(cpus)*p.CPU + memGB*p.Memory + float64(gpus)*p.GPU
}

// settings are Options checked and resolved: the REST config to reach the
// cluster and where the driver's objects go.
type settings struct {
	rest                 *rest.Config
	region               string
	namespace            string
	price                PriceOptions
	unschedulableTimeout time.Duration
	// proxyJump is set when the entry names a jump host (only logged).
	proxyJump bool
}

// inClusterConfig is rest.InClusterConfig; tests replace it.
var inClusterConfig = rest.InClusterConfig

// resolve checks o and builds the settings: the kubeconfig (file, data, or
// the in-cluster configuration when o has none), its context, the
// namespace, the price and the unschedulable timeout.
func (o Options) resolve() (settings, error) {
	s := settings{price: o.Price, unschedulableTimeout: DefaultUnschedulableTimeout, proxyJump: o.ProxyJump != nil}
	if o.Price.CPU < 0 || o.Price.Memory < 0 || o.Price.GPU < 0 {
		return s, fmt.Errorf("price: %+v: prices cannot be negative", o.Price)
	}
	if o.UnschedulableTimeout != "" {
		d, err := time.ParseDuration(o.UnschedulableTimeout)
		if err != nil {
			return s, fmt.Errorf("unschedulable_timeout: %w", err)
		}
		if d <= 0 {
			return s, fmt.Errorf("unschedulable_timeout: %s: want a positive duration", o.UnschedulableTimeout)
		}
		s.unschedulableTimeout = d
	}
	if o.ProxyJump != nil && (o.ProxyJump.Port < 0 || o.ProxyJump.Port > 65535) {
		return s, fmt.Errorf("proxy_jump: port %d out of range", o.ProxyJump.Port)
	}
	if len(o.Contexts) > 1 {
		return s, fmt.Errorf("contexts: %d given: a backend entry drives one context; configure one entry per context", len(o.Contexts))
	}
	var context string
	if len(o.Contexts) == 1 {
		if o.Contexts[0].Name == "" {
			return s, errors.New("contexts[0]: name is required")
		}
		context = o.Contexts[0].Name
		s.proxyJump = s.proxyJump || o.Contexts[0].ProxyJump != nil
	}
	if o.Namespace != "" {
		if msgs := validateNamespace(o.Namespace); len(msgs) > 0 {
			return s, fmt.Errorf("namespace %q: %v", o.Namespace, msgs)
		}
	}

	if o.Kubeconfig == nil {
		if context != "" {
			return s, errors.New("contexts: a context needs a kubeconfig")
		}
		rc, err := inClusterConfig()
		if err != nil {
			return s, fmt.Errorf("kubeconfig is required outside a cluster (in-cluster configuration: %w)", err)
		}
		s.rest, s.region, s.namespace = rc, inClusterRegion, o.Namespace
		if s.namespace == "" {
			s.namespace = DefaultNamespace
		}
		tune(s.rest)
		return s, nil
	}

	var kc *clientcmdapi.Config
	var err error
	switch {
	case o.Kubeconfig.Data != "":
		kc, err = clientcmd.Load([]byte(o.Kubeconfig.Data))
		if err != nil {
			return s, fmt.Errorf("kubeconfig.data: %w", err)
		}
	case o.Kubeconfig.Filename != "":
		path := o.Kubeconfig.Filename
		if tail, ok := strings.CutPrefix(path, "~/"); ok {
			if home, herr := os.UserHomeDir(); herr == nil {
				path = filepath.Join(home, tail)
			}
		}
		b, rerr := os.ReadFile(path)
		if rerr != nil {
			return s, fmt.Errorf("kubeconfig.filename: %w", rerr)
		}
		kc, err = clientcmd.Load(b)
		if err != nil {
			return s, fmt.Errorf("kubeconfig.filename %s: %w", o.Kubeconfig.Filename, err)
		}
	default:
		return s, errors.New("kubeconfig: filename or data is required")
	}
	if context == "" {
		context = kc.CurrentContext
	}
	kctx, ok := kc.Contexts[context]
	if !ok || context == "" {
		return s, fmt.Errorf("kubeconfig: context %q not found (contexts: %v)", context, contextNames(kc))
	}
	cc := clientcmd.NewNonInteractiveClientConfig(*kc, context, &clientcmd.ConfigOverrides{}, nil)
	if s.rest, err = cc.ClientConfig(); err != nil {
		return s, fmt.Errorf("kubeconfig: context %q: %w", context, err)
	}
	s.region, s.namespace = context, o.Namespace
	if s.namespace == "" {
		s.namespace = kctx.Namespace
	}
	if s.namespace == "" {
		s.namespace = DefaultNamespace
	}
	tune(s.rest)
	return s, nil
}

// tune raises client-go's default client-side rate limit (5 requests per
// second), which a server reconciling many tasks would hit.
func tune(rc *rest.Config) {
	rc.QPS, rc.Burst = 50, 100
	if rc.UserAgent == "" {
		rc.UserAgent = "hoist"
	}
}

func contextNames(kc *clientcmdapi.Config) []string {
	out := make([]string, 0, len(kc.Contexts))
	for n := range kc.Contexts {
		out = append(out, n)
	}
	return out
}

// validateNamespace returns why name is no valid namespace name (a DNS
// label), none when it is.
func validateNamespace(name string) []string { return validation.IsDNS1123Label(name) }

// jsonUnmarshalStrict decodes b into v, refusing unknown fields (a custom
// UnmarshalJSON does not inherit its decoder's setting).
func jsonUnmarshalStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}
