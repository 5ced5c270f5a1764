// Command libcni-driver drives a CNI network configuration list through
// libcni exactly as containerd (go-cni) and CRI-O (ocicni) do: it loads a
// conflist, builds a RuntimeConf, and calls AddNetworkList /
// CheckNetworkList / DelNetworkList on a CNIConfig with a result cache dir.
//
// It is built offline in GOPATH mode against Debian's
// golang-github-appc-cni-dev (libcni 1.1.x):
//
//	GO111MODULE=off GOPATH=$tmp:/usr/share/gocode go build -o libcni-driver .
//
// Usage:
//
//	libcni-driver -conflist FILE -plugin-dir DIR[:DIR] -cache-dir DIR \
//	    [-id ID] [-netns PATH] [-ifname eth0] [-args 'K=V;K=V'] \
//	    [-cap-args JSON] COMMAND
//
// COMMAND is one of:
//
//	add     AddNetworkList; prints {"command","elapsedMs","result"}
//	check   CheckNetworkList (uses the cached ADD result)
//	del     DelNetworkList (uses the cached ADD result; removes it)
//	cached  GetNetworkListCachedResult; prints the cached result or null
//	status  STATUS (CNI 1.1) on every plugin of the list, by direct exec
//	gc      GC (CNI 1.1) on every plugin, by direct exec; -valid 'id/ifname,...'
//	version VERSION of every plugin of the list
//
// libcni 1.1.x has no GCNetworkList / GetStatusNetworkList, so status and gc
// exec the plugins directly with the conflist's name and cniVersion injected,
// the way newer libcni builds their stdin.
//
// Output is one JSON object on stdout. On failure it prints
// {"command","elapsedMs","error"} on stdout and exits 1.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/invoke"
)

type options struct {
	conflist  string
	pluginDir string
	cacheDir  string
	id        string
	netns     string
	ifname    string
	args      string
	capArgs   string
	valid     string
	timeout   time.Duration
}

// output is what every command prints.
type output struct {
	Command   string      `json:"command"`
	ElapsedMs float64     `json:"elapsedMs"`
	Result    interface{} `json:"result,omitempty"`
	Error     string      `json:"error,omitempty"`
}

func main() {
	var o options
	flag.StringVar(&o.conflist, "conflist", "", "network configuration list (JSON file)")
	flag.StringVar(&o.pluginDir, "plugin-dir", "/usr/lib/cni", "plugin directories, colon-separated")
	flag.StringVar(&o.cacheDir, "cache-dir", "", "libcni result cache directory (required)")
	flag.StringVar(&o.id, "id", "", "container id")
	flag.StringVar(&o.netns, "netns", "", "network namespace path (may be empty for del)")
	flag.StringVar(&o.ifname, "ifname", "eth0", "interface name inside the netns")
	flag.StringVar(&o.args, "args", "", "CNI_ARGS, e.g. 'K8S_POD_NAMESPACE=ns;K8S_POD_NAME=p'")
	flag.StringVar(&o.capArgs, "cap-args", "", "runtimeConfig capability args as a JSON object")
	flag.StringVar(&o.valid, "valid", "", "gc: valid attachments, 'containerid/ifname,...'")
	flag.DurationVar(&o.timeout, "timeout", 60*time.Second, "timeout for the whole command")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: libcni-driver [flags] add|check|del|cached|status|gc|version")
		flag.PrintDefaults()
		os.Exit(2)
	}
	cmd := flag.Arg(0)
	start := time.Now()
	res, err := run(cmd, &o)
	out := output{Command: cmd, ElapsedMs: float64(time.Since(start).Microseconds()) / 1000.0}
	if err != nil {
		out.Error = err.Error()
	} else {
		out.Result = res
	}
	enc := json.NewEncoder(os.Stdout)
	if encErr := enc.Encode(out); encErr != nil {
		fmt.Fprintln(os.Stderr, "libcni-driver: encoding output:", encErr)
		os.Exit(1)
	}
	if err != nil {
		os.Exit(1)
	}
}

func run(cmd string, o *options) (interface{}, error) {
	if o.conflist == "" || o.cacheDir == "" {
		return nil, fmt.Errorf("-conflist and -cache-dir are required")
	}
	list, err := libcni.ConfListFromFile(o.conflist)
	if err != nil {
		return nil, fmt.Errorf("loading %s: %w", o.conflist, err)
	}
	rt, err := runtimeConf(o)
	if err != nil {
		return nil, err
	}
	paths := filepath.SplitList(o.pluginDir)
	cni := libcni.NewCNIConfigWithCacheDir(paths, o.cacheDir, nil)
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()

	switch cmd {
	case "add":
		needID(o)
		r, err := cni.AddNetworkList(ctx, list, rt)
		if err != nil {
			return nil, err
		}
		return r, nil
	case "check":
		needID(o)
		return nil, cni.CheckNetworkList(ctx, list, rt)
	case "del":
		needID(o)
		return nil, cni.DelNetworkList(ctx, list, rt)
	case "cached":
		needID(o)
		r, err := cni.GetNetworkListCachedResult(list, rt)
		if err != nil {
			return nil, err
		}
		if r == nil {
			return nil, nil
		}
		return r, nil
	case "status":
		return nil, execEach(ctx, list, paths, "STATUS", rt, nil)
	case "gc":
		return nil, execEach(ctx, list, paths, "GC", rt, validAttachments(o.valid))
	case "version":
		infos := map[string]interface{}{}
		for _, p := range list.Plugins {
			info, err := cni.GetVersionInfo(ctx, p.Network.Type)
			if err != nil {
				return nil, fmt.Errorf("VERSION of %s: %w", p.Network.Type, err)
			}
			infos[p.Network.Type] = info.SupportedVersions()
		}
		return infos, nil
	default:
		return nil, fmt.Errorf("unknown command %q", cmd)
	}
}

func needID(o *options) {
	if o.id == "" {
		fmt.Fprintln(os.Stderr, "libcni-driver: -id is required")
		os.Exit(2)
	}
}

func runtimeConf(o *options) (*libcni.RuntimeConf, error) {
	rt := &libcni.RuntimeConf{
		ContainerID: o.id,
		NetNS:       o.netns,
		IfName:      o.ifname,
	}
	if o.args != "" {
		for _, kv := range strings.Split(o.args, ";") {
			if kv == "" {
				continue
			}
			parts := strings.SplitN(kv, "=", 2)
			if len(parts) != 2 {
				return nil, fmt.Errorf("-args: %q is not K=V", kv)
			}
			rt.Args = append(rt.Args, [2]string{parts[0], parts[1]})
		}
	}
	if o.capArgs != "" {
		if err := json.Unmarshal([]byte(o.capArgs), &rt.CapabilityArgs); err != nil {
			return nil, fmt.Errorf("-cap-args: %w", err)
		}
	}
	return rt, nil
}

func validAttachments(s string) []map[string]string {
	out := []map[string]string{}
	for _, a := range strings.Split(s, ",") {
		if a == "" {
			continue
		}
		parts := strings.SplitN(a, "/", 2)
		ifname := "eth0"
		if len(parts) == 2 {
			ifname = parts[1]
		}
		out = append(out, map[string]string{"containerID": parts[0], "ifname": ifname})
	}
	return out
}

// execEach runs a CNI 1.1 verb libcni 1.1.x does not know on every plugin
// of the list, in order, with the plugin's own config plus the list's name
// and cniVersion (and, for GC, cni.dev/valid-attachments).
func execEach(ctx context.Context, list *libcni.NetworkConfigList, paths []string,
	verb string, rt *libcni.RuntimeConf, valid []map[string]string) error {
	exec := &invoke.RawExec{Stderr: os.Stderr}
	for _, p := range list.Plugins {
		var conf map[string]interface{}
		if err := json.Unmarshal(p.Bytes, &conf); err != nil {
			return fmt.Errorf("plugin %s config: %w", p.Network.Type, err)
		}
		conf["name"] = list.Name
		conf["cniVersion"] = list.CNIVersion
		if valid != nil {
			conf["cni.dev/valid-attachments"] = valid
		}
		stdin, err := json.Marshal(conf)
		if err != nil {
			return err
		}
		path, err := invoke.FindInPath(p.Network.Type, paths)
		if err != nil {
			return err
		}
		args := &invoke.Args{
			Command:     verb,
			ContainerID: rt.ContainerID,
			NetNS:       rt.NetNS,
			IfName:      rt.IfName,
			Path:        strings.Join(paths, string(os.PathListSeparator)),
		}
		if _, err := exec.ExecPlugin(ctx, path, stdin, args.AsEnv()); err != nil {
			return fmt.Errorf("%s of %s: %w", verb, p.Network.Type, err)
		}
	}
	return nil
}
