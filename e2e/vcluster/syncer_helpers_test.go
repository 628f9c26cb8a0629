package vcluster

// The harness of syncer_test.go: two envtest kube-apiservers ("host" and "virtual") and
// vcluster's own syncer between them, in a process of its own that runs vcluster's start
// sequence (runSyncerProcess) with synchook loaded as a plugin v2 from its plugin folder.

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/pprof"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	loftlogr "github.com/loft-sh/log/logr"
	vclusterconfig "github.com/loft-sh/vcluster/config"
	"github.com/loft-sh/vcluster/pkg/config"
	"github.com/loft-sh/vcluster/pkg/constants"
	"github.com/loft-sh/vcluster/pkg/integrations"
	"github.com/loft-sh/vcluster/pkg/plugin"
	plugintypes "github.com/loft-sh/vcluster/pkg/plugin/types"
	pluginv2 "github.com/loft-sh/vcluster/pkg/plugin/v2"
	"github.com/loft-sh/vcluster/pkg/pro"
	"github.com/loft-sh/vcluster/pkg/setup"
	setupconfig "github.com/loft-sh/vcluster/pkg/setup/config"
	"github.com/loft-sh/vcluster/pkg/specialservices"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"
)

// Environment of the syncer harness.
const (
	// envSyncerProcess, set in the environment of a copy of this test binary, makes TestMain
	// run vcluster's syncer (runSyncerProcess) instead of the tests; its value is the path of
	// the vcluster config file (what the chart mounts at /var/lib/vcluster/config.yaml).
	envSyncerProcess = "SYNCHOOK_E2E_SYNCER_CONFIG"
	// envSyncerBackingStore is the etcd URL of the virtual cluster's envtest (see
	// runSyncerProcess).
	envSyncerBackingStore = "SYNCHOOK_E2E_SYNCER_BACKING_STORE"
	// envNoLoopWindow is how long TestVClusterSyncer watches for updates after the objects
	// settled (a Go duration); default defaultNoLoopWindow (issue 26's 30 s).
	envNoLoopWindow     = "SYNCHOOK_NO_LOOP_WINDOW"
	defaultNoLoopWindow = 30 * time.Second
	// envSyncerLogDir, when set, is a directory where every syncer's whole log (vcluster's and
	// its plugins') is written when its test ends.
	envSyncerLogDir = "SYNCHOOK_SYNCER_LOG_DIR"
	// envSyncerPprof, set in the syncer process's environment, is a host:port where it serves
	// net/http/pprof (TestVClusterSyncerThroughput's profiles).
	envSyncerPprof = "SYNCHOOK_E2E_SYNCER_PPROF"
	// kubebuilderAssets names the directory of kube-apiserver and etcd.
	kubebuilderAssets = "KUBEBUILDER_ASSETS"
)

// Names the harness uses in both clusters.
const (
	vclusterName  = "e2e"
	hostNamespace = "vcluster-e2e"
	tenantNS      = "team-a"
	// Annotations vcluster puts on every object it creates on the host.
	objectNameAnnotation      = "vcluster.loft.sh/object-name"
	objectNamespaceAnnotation = "vcluster.loft.sh/object-namespace"
)

// cluster is one envtest kube-apiserver + etcd.
type cluster struct {
	name string
	// configure, when set, is called with the kube-apiserver before it starts (its flags).
	configure  func(api *envtest.APIServer)
	env        *envtest.Environment
	cfg        *rest.Config
	cs         kubernetes.Interface
	kubeconfig []byte // a system:masters user's kubeconfig
}

// clusters is the pair the syncer runs between.
type clusters struct {
	host, virtual *cluster
}

// requireEnvtest skips tb when the envtest binaries are not configured.
func requireEnvtest(tb testing.TB) string {
	tb.Helper()
	dir := os.Getenv(kubebuilderAssets)
	if dir == "" {
		tb.Skip("KUBEBUILDER_ASSETS is not set: vcluster's syncer needs two kube-apiservers; " +
			"run with KUBEBUILDER_ASSETS=$(hack/envtest-assets.sh | tail -n 1) (hack/test.sh sets it)")
	}
	return dir
}

var silenceControllerRuntime sync.Once

// startClusters starts the host and the virtual apiserver at once and stops them when tb
// ends. Both use envtest's default service CIDR, as a real vcluster's virtual apiserver
// takes the host's.
func startClusters(tb testing.TB) *clusters {
	tb.Helper()
	return startClustersWith(tb, nil)
}

// startClustersWith is startClusters with configure called on each cluster's kube-apiserver
// (by cluster name, "host" or "virtual") before it starts.
func startClustersWith(tb testing.TB, configure func(name string, api *envtest.APIServer)) *clusters {
	tb.Helper()
	assets := requireEnvtest(tb)
	silenceControllerRuntime.Do(func() { ctrl.SetLogger(logr.Discard()) }) // envtest logs through it
	cl := &clusters{host: &cluster{name: "host"}, virtual: &cluster{name: "virtual"}}
	if configure != nil {
		for _, c := range []*cluster{cl.host, cl.virtual} {
			c.configure = func(api *envtest.APIServer) { configure(c.name, api) }
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, c := range []*cluster{cl.host, cl.virtual} {
		wg.Go(func() { errs[i] = c.start(assets) })
	}
	wg.Wait()
	tb.Cleanup(func() {
		for _, c := range []*cluster{cl.host, cl.virtual} {
			if c.env != nil {
				if err := c.env.Stop(); err != nil {
					tb.Errorf("stop the %s apiserver: %v", c.name, err)
				}
			}
		}
	})
	if err := errors.Join(errs...); err != nil {
		tb.Fatal(err)
	}
	return cl
}

// startAttempts bounds how often cluster.start tries a cluster whose etcd or kube-apiserver
// could not bind the port envtest suggested.
const startAttempts = 4

// start starts c's etcd and kube-apiserver from assets. envtest suggests their ports
// (controller-runtime's addr.Suggest: a port free a moment ago, reserved against other envtest
// users by a lock file) and retries a failed start on the same ports; when another process
// took such a port in between (two test runs on one machine), the start fails with "address
// already in use" in the process's output. Such a start is tried again on fresh ports, up to
// startAttempts times; any other failure is returned at once.
func (c *cluster) start(assets string) error {
	for attempt := 1; ; attempt++ {
		out := &logBuffer{}
		api := &envtest.APIServer{Out: out, Err: out}
		if c.configure != nil {
			c.configure(api)
		}
		c.env = &envtest.Environment{
			BinaryAssetsDirectory: assets,
			// envtest's 20 s to start or stop etcd and kube-apiserver is short on a loaded
			// 2-core machine (internal/testenv.ControlPlaneTimeout in the main module)
			ControlPlaneStartTimeout: 2 * time.Minute,
			ControlPlaneStopTimeout:  2 * time.Minute,
			ControlPlane: envtest.ControlPlane{
				Etcd:      &envtest.Etcd{Out: out, Err: out},
				APIServer: api,
			},
		}
		cfg, err := c.env.Start()
		if err == nil {
			c.cfg = rest.CopyConfig(cfg)
			break
		}
		_ = c.env.Stop()
		c.env = nil
		if attempt == startAttempts || !strings.Contains(out.String(), "address already in use") {
			return fmt.Errorf("start the %s apiserver (attempt %d): %w\noutput (last 20 lines):\n%s", c.name, attempt, err, out.tail(20))
		}
	}
	user, err := c.env.ControlPlane.AddUser(envtest.User{Name: "vcluster-" + c.name, Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return fmt.Errorf("%s apiserver: add user: %w", c.name, err)
	}
	if c.kubeconfig, err = user.KubeConfig(); err != nil {
		return fmt.Errorf("%s apiserver: kubeconfig: %w", c.name, err)
	}
	c.cfg.QPS, c.cfg.Burst = 500, 1000
	c.cs, err = kubernetes.NewForConfig(c.cfg)
	return err
}

// pids returns the process ids of c's etcd and kube-apiserver: the children of this test
// process whose command line names their ports (envtest keeps the processes to itself).
func (c *cluster) pids() (etcd, apiserver int, err error) {
	etcdArg := "--listen-client-urls=" + c.env.ControlPlane.Etcd.URL.String()
	apiArg := "--secure-port=" + c.env.ControlPlane.APIServer.Port
	self := os.Getpid()
	children, err := processes(func(st procStat) bool { return st.ppid == self })
	if err != nil {
		return 0, 0, err
	}
	for pid := range children {
		cmdline, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
		if err != nil {
			continue
		}
		for _, arg := range strings.Split(string(cmdline), "\x00") {
			switch arg {
			case etcdArg:
				etcd = pid
			case apiArg:
				apiserver = pid
			}
		}
	}
	if etcd == 0 || apiserver == 0 {
		return 0, 0, fmt.Errorf("%s cluster: no child process with %s (found pid %d) or %s (found pid %d)", c.name, etcdArg, etcd, apiArg, apiserver)
	}
	return etcd, apiserver, nil
}

// bootstrap creates by hand what the vcluster chart and the absent control plane would have
// made: on the host, the vcluster's namespace, its config Secret vc-config-<name> (the chart
// writes the values there; InitAndValidateConfig reads its annotations) and its Service <name>
// (the chart's; SetGlobalOwner makes it the owner of synced objects and SyncKubernetesService
// copies its cluster IP to the virtual default/kubernetes Service); in the virtual cluster, the
// default ServiceAccount (kube-controller-manager's, which envtest lacks; the syncer waits for
// it) and the tenant's namespace.
func (cl *clusters) bootstrap(tb testing.TB, values []byte) {
	tb.Helper()
	ctx := tb.Context()
	h, v := cl.host.cs.CoreV1(), cl.virtual.cs.CoreV1()
	for _, err := range []error{
		ignoreExists(h.Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: hostNamespace}}, metav1.CreateOptions{})),
		ignoreExists(h.Secrets(hostNamespace).Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "vc-config-" + vclusterName},
			Data:       map[string][]byte{"config.yaml": values},
		}, metav1.CreateOptions{})),
		ignoreExists(h.Services(hostNamespace).Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: vclusterName, Labels: map[string]string{"app": "vcluster", "release": vclusterName}},
			Spec: corev1.ServiceSpec{
				Ports:    []corev1.ServicePort{{Name: "https", Port: 443, TargetPort: intstr.FromInt32(8443), Protocol: corev1.ProtocolTCP}},
				Selector: map[string]string{"app": "vcluster", "release": vclusterName},
			},
		}, metav1.CreateOptions{})),
		ignoreExists(v.ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})),
		ignoreExists(v.Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tenantNS}}, metav1.CreateOptions{})),
		ignoreExists(v.ServiceAccounts(tenantNS).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})),
	} {
		if err != nil {
			tb.Fatalf("bootstrap: %v", err)
		}
	}
}

func ignoreExists[T any](_ T, err error) error {
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// repoDir is the synchook repository (SYNCHOOK_REPO, default two directories up).
func repoDir(tb testing.TB) string {
	tb.Helper()
	repo := os.Getenv(envSynchookRepo)
	if repo == "" {
		repo = filepath.Join("..", "..")
	}
	abs, err := filepath.Abs(repo)
	if err != nil {
		tb.Fatal(err)
	}
	return abs
}

// pluginYAMLEntry returns plugins.synchook of the repository's plugin.yaml, the values users
// deploy: image, command, args and the hook config.
func pluginYAMLEntry(tb testing.TB) map[string]any {
	tb.Helper()
	raw, err := os.ReadFile(filepath.Join(repoDir(tb), "plugin.yaml"))
	if err != nil {
		tb.Fatal(err)
	}
	var values struct {
		Plugins map[string]map[string]any `json:"plugins"`
	}
	if err := yaml.Unmarshal(raw, &values); err != nil {
		tb.Fatalf("plugin.yaml: %v", err)
	}
	entry, ok := values.Plugins["synchook"]
	if !ok {
		tb.Fatal("plugin.yaml has no plugins.synchook")
	}
	return entry
}

// pluginYAMLHooks returns the hooks of plugin.yaml's config, to which tests append their own.
func pluginYAMLHooks(tb testing.TB) []any {
	tb.Helper()
	cfg, _ := pluginYAMLEntry(tb)["config"].(map[string]any)
	hooks, _ := cfg["hooks"].([]any)
	if len(hooks) == 0 {
		tb.Fatal("plugin.yaml's plugins.synchook.config has no hooks")
	}
	return hooks
}

// syncerPlugin is one plugin v2 of a syncer: its directory name under the plugin folder (the
// key of plugins: in the values), its binary and, for synchook, the plugins.<name> values.
type syncerPlugin struct {
	Dir    string
	Binary string
	Values map[string]any // plugins.<Dir>; nil: no entry (no PLUGIN_CONFIG)
}

// synchookFromPluginYAML is synchook as plugin.yaml deploys it, with config as its
// plugins.synchook.config (nil: plugin.yaml's own).
func synchookFromPluginYAML(tb testing.TB, cfg map[string]any) syncerPlugin {
	tb.Helper()
	entry := maps.Clone(pluginYAMLEntry(tb))
	if cfg != nil {
		entry["config"] = cfg
	}
	return syncerPlugin{Dir: "synchook", Binary: binary(tb, binSynchook), Values: entry}
}

// vclusterValues returns the vcluster config the syncer loads: the chart's default values
// (vcluster's config/values.yaml, embedded in its Go module as config.Values, which is what
// helm puts into the config Secret for a release without overrides), plugins: from plugins,
// and the two overrides this harness needs: where the virtual cluster's admin kubeconfig is
// (experimental.virtualClusterKubeConfig.kubeConfig; in a pod the control plane writes it to
// /data/pki/admin.conf), and controlPlane.proxy.port: the virtual apiserver's port. In a pod
// vcluster's proxy serves the virtual cluster's API at https://localhost:<that port>, which is
// where the kubeconfig it hands plugins (Initialize's syncerConfig) points; the harness runs no
// proxy, so that address is the virtual envtest apiserver itself.
func vclusterValues(tb testing.TB, kubeconfigPath string, kubeconfig []byte, plugins []syncerPlugin) []byte {
	tb.Helper()
	var values map[string]any
	if err := yaml.Unmarshal([]byte(vclusterconfig.Values), &values); err != nil {
		tb.Fatalf("vcluster's default values: %v", err)
	}
	ps := map[string]any{}
	for _, p := range plugins {
		if p.Values != nil {
			ps[p.Dir] = p.Values
		}
	}
	values["plugins"] = ps
	exp, _ := values["experimental"].(map[string]any)
	if exp == nil {
		exp = map[string]any{}
		values["experimental"] = exp
	}
	exp["virtualClusterKubeConfig"] = map[string]any{"kubeConfig": kubeconfigPath}
	kc, err := clientcmd.Load(kubeconfig)
	if err != nil {
		tb.Fatalf("virtual kubeconfig: %v", err)
	}
	var port int
	for _, c := range kc.Clusters {
		u, err := url.Parse(c.Server)
		if err != nil {
			tb.Fatalf("virtual kubeconfig server: %v", err)
		}
		if port, err = strconv.Atoi(u.Port()); err != nil {
			tb.Fatalf("virtual kubeconfig server %s: no port", c.Server)
		}
	}
	cp, _ := values["controlPlane"].(map[string]any)
	if cp == nil {
		cp = map[string]any{}
		values["controlPlane"] = cp
	}
	proxy, _ := cp["proxy"].(map[string]any)
	if proxy == nil {
		proxy = map[string]any{}
		cp["proxy"] = proxy
	}
	proxy["port"] = port
	out, err := yaml.Marshal(values)
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

// syncerSpec is what startSyncer runs.
type syncerSpec struct {
	Plugins []syncerPlugin
	// Env is added to the syncer's environment (and so to its plugins').
	Env []string
	// OnStart, when set, is called with the syncer's pid (= its process group) once started.
	OnStart func(pid int)
}

// syncer is a running vcluster syncer process (and its plugins, in its process group).
type syncer struct {
	// metricsAddr is where synchook serves /metrics (SYNCHOOK_METRICS_BIND_ADDRESS, set in the
	// syncer's environment, which vcluster passes on to its plugins).
	metricsAddr string
	cmd         *exec.Cmd
	log         *logBuffer
	done        chan struct{} // closed when the process exited
	err         error         // its exit, after done
}

// startSyncer lays out the plugin folder and config in a fresh directory, bootstraps the
// clusters for them and starts vcluster's syncer in a copy of this test binary (TestMain →
// runSyncerProcess), in a process group of its own so that stop also ends the plugins it
// started. It returns once the syncer has written the virtual cluster's kubeconfig Secret
// vc-<name> on the host, the last step of setup.StartControllers.
func startSyncer(tb testing.TB, cl *clusters, spec syncerSpec) *syncer {
	tb.Helper()
	dir := tb.TempDir()
	folder := filepath.Join(dir, "plugins")
	if err := os.MkdirAll(folder, 0o755); err != nil {
		tb.Fatal(err)
	}
	for _, p := range spec.Plugins {
		pdir := filepath.Join(folder, p.Dir)
		if err := os.MkdirAll(pdir, 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := linkOrCopy(p.Binary, filepath.Join(pdir, "plugin")); err != nil {
			tb.Fatal(err)
		}
	}
	virtualKubeconfig := filepath.Join(dir, "admin.conf")
	hostKubeconfig := filepath.Join(dir, "host.conf")
	values := vclusterValues(tb, virtualKubeconfig, cl.virtual.kubeconfig, spec.Plugins)
	configPath := filepath.Join(dir, "config.yaml")
	for path, data := range map[string][]byte{virtualKubeconfig: cl.virtual.kubeconfig, hostKubeconfig: cl.host.kubeconfig, configPath: values} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			tb.Fatal(err)
		}
	}
	cl.bootstrap(tb, values)

	// A stale kubeconfig Secret (from a previous syncer) would make the wait below pass at once.
	err := cl.host.cs.CoreV1().Secrets(hostNamespace).Delete(tb.Context(), "vc-"+vclusterName, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		tb.Fatal(err)
	}

	// vcluster's SyncKubernetesService sometimes fails its first start on a fresh cluster pair
	// ("provided IP is already allocated", about 1 start in 20): the syncer exits before any
	// plugin runs. Such a start is tried again, up to three times; any other failure is fatal.
	for attempt := 1; ; attempt++ {
		s, err := launchSyncer(tb, cl, spec, folder, configPath, hostKubeconfig)
		if err == nil {
			return s
		}
		if attempt == 3 || !strings.Contains(s.log.String(), "provided IP is already allocated") {
			tb.Fatal(err)
		}
		tb.Logf("vcluster's syncer exited at start on the known Service IP race; starting it again (attempt %d)", attempt+1)
	}
}

// launchSyncer starts one syncer process for startSyncer and waits for it as startSyncer
// says; an error when it exited or did not get that far (the syncer is returned for its log).
func launchSyncer(tb testing.TB, cl *clusters, spec syncerSpec, folder, configPath, hostKubeconfig string) (*syncer, error) {
	self, err := os.Executable()
	if err != nil {
		tb.Fatal(err)
	}
	s := &syncer{log: &logBuffer{}, done: make(chan struct{}), metricsAddr: freeAddr(tb)}
	s.cmd = exec.Command(self)
	s.cmd.Env = append(os.Environ(),
		envSyncerProcess+"="+configPath,
		envSyncerBackingStore+"="+cl.virtual.env.ControlPlane.Etcd.URL.String(),
		"VCLUSTER_NAME="+vclusterName,
		"POD_NAME="+vclusterName+"-0",
		"POD_NAMESPACE="+hostNamespace,
		"NAMESPACE="+hostNamespace,
		"KUBECONFIG="+hostKubeconfig,
		"PLUGIN_FOLDER="+folder,
		envMetricsBindAddress+"="+s.metricsAddr,
	)
	s.cmd.Env = append(s.cmd.Env, spec.Env...)
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	s.cmd.WaitDelay = 5 * time.Second
	start := time.Now()
	if err := s.cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	if spec.OnStart != nil {
		spec.OnStart(s.cmd.Process.Pid)
	}
	go func() {
		s.err = s.cmd.Wait()
		close(s.done)
	}()
	tb.Cleanup(func() {
		s.stop()
		if dir := os.Getenv(envSyncerLogDir); dir != "" {
			name := strings.NewReplacer("/", "_", " ", "_").Replace(tb.Name()) + "-" + strconv.Itoa(s.cmd.Process.Pid) + ".log"
			if err := os.WriteFile(filepath.Join(dir, name), []byte(s.log.String()), 0o644); err != nil {
				tb.Errorf("keep the syncer log: %v", err)
			}
		}
		if tb.Failed() {
			tb.Logf("syncer log (last 150 lines):\n%s", s.log.tail(150))
		}
	})

	err = wait.PollUntilContextTimeout(tb.Context(), 100*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		select {
		case <-s.done:
			return false, fmt.Errorf("the syncer exited: %w", s.err)
		default:
		}
		_, err := cl.host.cs.CoreV1().Secrets(hostNamespace).Get(ctx, "vc-"+vclusterName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		return s, fmt.Errorf("vcluster's syncer did not start: %w\nlog (last 100 lines):\n%s", err, s.log.tail(100))
	}
	tb.Logf("vcluster's syncer started in %s with plugins %v", time.Since(start).Round(time.Millisecond), pluginDirs(spec.Plugins))
	return s, nil
}

func pluginDirs(ps []syncerPlugin) []string {
	var dirs []string
	for _, p := range ps {
		dirs = append(dirs, p.Dir)
	}
	return dirs
}

// stop kills the syncer's process group (the syncer and the plugins it started) and waits for
// the syncer. Idempotent.
func (s *syncer) stop() {
	select {
	case <-s.done:
	default:
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		<-s.done
	}
	// plugins may outlive the syncer's exit by a moment; the group is the syncer's pid
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
}

// envMetricsBindAddress is synchook's env var for a /metrics listener in plugin v2 mode.
const envMetricsBindAddress = "SYNCHOOK_METRICS_BIND_ADDRESS"

// errNoMetrics: nothing serves synchook's metrics at the syncer's metrics address (a synchook
// that predates SYNCHOOK_METRICS_BIND_ADDRESS, or no synchook plugin).
var errNoMetrics = errors.New("no synchook /metrics listener")

// metricSum returns the sum of every sample of the metric family name that synchook serves
// (0 when the family has no samples yet).
func (s *syncer) metricSum(ctx context.Context, name string) (float64, error) {
	samples, err := s.metricSamples(ctx, name)
	var sum float64
	for _, v := range samples {
		sum += v
	}
	return sum, err
}

// metricSamples returns the samples of the metric family name that synchook serves, by their
// label set as written ({...}, "" for none).
func (s *syncer) metricSamples(ctx context.Context, name string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+s.metricsAddr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errNoMetrics, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK || !bytes.Contains(body, []byte("synchook_")) {
		return nil, fmt.Errorf("%w: %s answered %s", errNoMetrics, s.metricsAddr, resp.Status)
	}
	samples := map[string]float64{}
	for _, line := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(line, name+" ") && !strings.HasPrefix(line, name+"{") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			return nil, fmt.Errorf("metric line %q: %w", line, err)
		}
		samples[strings.TrimPrefix(line[:i], name)] += v
	}
	return samples, nil
}

// freeAddr returns a 127.0.0.1 address whose port was free a moment ago.
func freeAddr(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's times (100 on Linux).
const clockTicks = 100

// groupCPU sums utime+stime of every process in process group pgid from /proc.
func groupCPU(pgid int) (time.Duration, error) {
	group, err := processes(func(st procStat) bool { return st.pgrp == pgid })
	if err != nil {
		return 0, err
	}
	var sum time.Duration
	for _, st := range group {
		sum += st.cpu
	}
	return sum, nil
}

// processes returns, by pid, the /proc/<pid>/stat of every process that keep takes (a process
// gone while it reads is left out).
func processes(keep func(procStat) bool) (map[int]procStat, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	found := map[int]procStat{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, err := readStat(pid); err == nil && keep(st) {
			found[pid] = st
		}
	}
	return found, nil
}

// procStat is what the harness reads of /proc/<pid>/stat.
type procStat struct {
	ppid, pgrp int
	cpu        time.Duration // utime + stime
}

// readStat reads /proc/<pid>/stat; an error when the process is gone.
func readStat(pid int) (procStat, error) {
	raw, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return procStat{}, err
	}
	// pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime
	i := bytes.LastIndexByte(raw, ')')
	if i < 0 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: no comm", pid)
	}
	f := strings.Fields(string(raw[i+1:]))
	if len(f) < 13 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	var st procStat
	st.ppid, _ = strconv.Atoi(f[1])
	st.pgrp, _ = strconv.Atoi(f[2])
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	st.cpu = time.Duration(ut+stime) * time.Second / clockTicks
	return st, nil
}

// logBuffer collects the syncer's output (its klog/zap lines and its plugins' stderr, which
// vcluster's go-plugin client copies into its log).
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// lines returns the lines that contain every one of subs.
func (b *logBuffer) lines(subs ...string) []string {
	var out []string
	sc := bufio.NewScanner(strings.NewReader(b.String()))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		line := sc.Text()
		if !slices.ContainsFunc(subs, func(s string) bool { return !strings.Contains(line, s) }) {
			out = append(out, line)
		}
	}
	return out
}

func (b *logBuffer) tail(n int) string {
	lines := strings.Split(strings.TrimRight(b.String(), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// runSyncerProcess is the syncer process: vcluster's own start sequence of `vcluster start` in
// a pod (cmd/vcluster/cmd/start.go, StartInCluster), minus what needs the pod's control plane.
// Called by TestMain when envSyncerProcess is set; returns the exit code.
//
//	config.LoadInClusterConfig        the values file (chart defaults + plugins:)
//	setupconfig.InitClientConfig      the host kubeconfig (KUBECONFIG) and namespace (NAMESPACE)
//	setupconfig.InitAndValidateConfig reads vc-config-<name>, sets the owner Service, translators
//	pro.LicenseInit                   (a no-op in vcluster's open-source build)
//	setup.Initialize                  SKIPPED: it generates certificates and starts kine and the
//	                                  virtual kube-apiserver; the virtual apiserver is envtest.
//	                                  Of its work the syncer needs specialservices.Default,
//	                                  set here as it does.
//	setup.NewControllerContext        waits for the virtual kubeconfig and the default
//	                                  ServiceAccount, STARTS THE PLUGINS from $PLUGIN_FOLDER
//	                                  (plugin.DefaultManager, here a v2OnlyManager), builds both managers
//	                                  with pluginhookclient's factories and the mapping store
//	pro.LicenseStart, integrations.StartIntegrations
//	setup.StartManagers               builds every syncer of the config and starts the managers
//	setup.StartProxy                  SKIPPED: the tenant-facing API proxy on :8443; tests talk
//	                                  to the virtual apiserver directly
//	setup.StartControllers            registers the controllers, SetLeader on the plugins
//	                                  (leader election is only for replicas > 1: not used)
//
// The mapping store keeps its data in the virtual cluster's backing store, which in a pod is
// kine on constants.K8sKineEndpoint; here it is the virtual envtest's etcd
// (envSyncerBackingStore), set into that variable before the context is built.
func runSyncerProcess() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()

	// vcluster's root command sets up this logger (cmd/vcluster/cmd/root.go)
	_ = os.Setenv("LOFT_LOG_LEVEL", "info")
	logger, err := loftlogr.NewLoggerWithOptions(
		loftlogr.WithOptionsFromEnv(),
		loftlogr.WithComponentName("vcluster"),
		loftlogr.WithGlobalZap(true),
		loftlogr.WithGlobalKlog(true),
	)
	if err != nil {
		fmt.Fprintln(os.Stderr, "logger:", err)
		return 1
	}
	ctrl.SetLogger(logger)
	ctx = klog.NewContext(ctx, logger)

	fail := func(step string, err error) int {
		logger.Error(err, "syncer process failed", "step", step)
		return 1
	}
	if addr := os.Getenv(envSyncerPprof); addr != "" {
		go func() {
			mux := http.NewServeMux()
			mux.HandleFunc("/debug/pprof/", pprof.Index)
			mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
			srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
			logger.Error(srv.ListenAndServe(), "pprof listener stopped", "address", addr)
		}()
	}
	if etcdURL := os.Getenv(envSyncerBackingStore); etcdURL != "" {
		constants.K8sKineEndpoint = etcdURL
	}

	vConfig, err := config.LoadInClusterConfig(os.Getenv("VCLUSTER_NAME"), os.Getenv(envSyncerProcess), nil)
	if err != nil {
		return fail("load config", err)
	}
	if vConfig.HostConfig, vConfig.HostNamespace, err = setupconfig.InitClientConfig(); err != nil {
		return fail("init client config", err)
	}
	if err := setupconfig.InitAndValidateConfig(ctx, vConfig); err != nil {
		return fail("init and validate config", err)
	}
	if err := pro.LicenseInit(ctx, vConfig); err != nil {
		return fail("license init", err)
	}
	specialservices.Default = pro.InitDNSServiceSyncing(vConfig) // from setup.Initialize
	plugin.DefaultManager = &v2OnlyManager{Manager: pluginv2.NewManager()}
	plugin.DefaultManager.SetProFeatures(pro.LicenseFeatures())

	controllerCtx, err := setup.NewControllerContext(ctx, vConfig)
	if err != nil {
		return fail("create controller context", err)
	}
	if err := pro.LicenseStart(controllerCtx); err != nil {
		return fail("license start", err)
	}
	if err := integrations.StartIntegrations(controllerCtx); err != nil {
		return fail("start integrations", err)
	}
	syncers, err := setup.StartManagers(controllerCtx.ToRegisterContext())
	if err != nil {
		return fail("start managers", err)
	}
	if err := setup.StartControllers(controllerCtx, syncers); err != nil {
		return fail("start controllers", err)
	}
	<-ctx.Done()
	return 0
}

// v2OnlyManager is vcluster's plugin manager (plugintypes.Manager, what plugin.DefaultManager
// holds) without its plugin v1 half. vcluster's own DefaultManager always starts the v1
// manager, whose VCluster gRPC server listens on the fixed localhost:10099 (pkg/config,
// PluginListenAddress) even when no v1 plugin is configured: two syncers on one machine (two
// test runs at once) collide there and the second exits. The harness loads plugins v2 only, so
// runSyncerProcess puts this in DefaultManager: the v2 manager as vcluster uses it, a Start that
// refuses a config naming a v1 plugin, and a log line with the client hooks the plugins
// registered (clientHooksLogPrefix), which the benchmark compares between plugins.
type v2OnlyManager struct {
	*pluginv2.Manager
}

var _ plugintypes.Manager = (*v2OnlyManager)(nil)

// clientHooksLogPrefix starts the syncer's log line that lists the registered client hooks as
// sorted "apiVersion/Kind/Type" entries, space separated.
const clientHooksLogPrefix = "e2e harness: plugin client hooks:"

// Start starts the plugins v2 of vConfig as vcluster's manager does; an error when vConfig
// names a plugin v1 (plugin: without version v2), which this manager cannot serve.
func (m *v2OnlyManager) Start(ctx context.Context, _ *rest.Config, syncerConfig *clientcmdapi.Config, vConfig *config.VirtualClusterConfig) error {
	legacy, err := vConfig.LegacyOptions()
	if err != nil {
		return fmt.Errorf("build legacy options: %w", err)
	}
	if len(legacy.Plugins) > 0 {
		return fmt.Errorf("plugins v1 %v configured: the e2e syncer runs vcluster's plugin v2 manager only", legacy.Plugins)
	}
	if err := m.Manager.Start(ctx, syncerConfig, vConfig); err != nil {
		return fmt.Errorf("start plugins: %w", err)
	}
	var hooks []string
	for vkt := range m.ClientHooks {
		hooks = append(hooks, vkt.APIVersion+"/"+vkt.Kind+"/"+vkt.Type)
	}
	slices.Sort(hooks)
	klog.FromContext(ctx).Info(clientHooksLogPrefix + " " + strings.Join(hooks, " "))
	return nil
}

// clientHookEntry matches one "apiVersion/Kind/Type" entry of the clientHooksLogPrefix line.
var clientHookEntry = regexp.MustCompile(`[A-Za-z0-9.-]+(/[A-Za-z0-9.-]+)?/[A-Za-z0-9]+/(Get|Create|Update|Delete|Apply)(Physical|Virtual)`)

// clientHooks returns the client hooks the syncer's plugins registered, as logged by
// v2OnlyManager.Start: sorted "apiVersion/Kind/Type" entries, space separated ("" when the line
// is not (yet) in the log).
func (s *syncer) clientHooks() string {
	lines := s.log.lines(clientHooksLogPrefix)
	if len(lines) == 0 {
		return ""
	}
	_, rest, _ := strings.Cut(lines[0], clientHooksLogPrefix)
	return strings.Join(clientHookEntry.FindAllString(rest, -1), " ")
}

// SetProFeatures hands vcluster's pro features to the plugins, as DefaultManager does.
func (m *v2OnlyManager) SetProFeatures(features map[string]bool) { m.ProFeatures = features }
