package backend

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/roseinfer/roseinfer/harness/client"
)

// trtllmQuirks is the request shape for TensorRT-LLM 1.1's trtllm-serve. Its
// request models reject unknown fields (extra="forbid"), so only fields it
// declares are sent: model, prompt (token ids), max_tokens, temperature,
// top_p, top_k, ignore_eos, stream, stream_options (CompletionRequest in
// tensorrt_llm/serve/openai_protocol.py). Its final usage chunk is typed as
// a chat chunk; the client reads it by shape, not by "object".
var trtllmQuirks = client.Quirks{
	PromptAsTokenIDs: true,
	ExtraSampling:    true,
	IncludeUsage:     true,
	ContinuousUsage:  true,
}

// trtllmServeMarker is in the command line of every trtllm-serve process.
const trtllmServeMarker = "tensorrt_llm.commands.serve"

// TRTLLMArgv is the server command after the interpreter, as the original
// built it:
//
//	-m tensorrt_llm.commands.serve M --host H --port P --backend B
//	--max_seq_len CTX --log_level error
//
// (no dtype flag: trtllm-serve has none; set it in a YAML file given with
// --trtllm-extra-llm-api-options), then our additions: [--tokenizer T]
// [--max_batch_size N] [--extra_llm_api_options F] and --trtllm-args.
func TRTLLMArgv(o *ThirdPartyOptions, r ThirdPartyRun, host string, port int) ([]string, error) {
	switch o.TRTLLMBackend {
	case "tensorrt", "trt", "pytorch", "_autodeploy":
	default:
		return nil, fmt.Errorf("--trtllm-backend %q: want tensorrt, trt, pytorch or _autodeploy", o.TRTLLMBackend)
	}
	extra, err := extraArgs("trtllm-args", o.TRTLLMArgs)
	if err != nil {
		return nil, err
	}
	argv := []string{"-m", trtllmServeMarker, r.model(), "--host", host, "--port", strconv.Itoa(port),
		"--backend", o.TRTLLMBackend, "--max_seq_len", strconv.Itoa(r.contextLen()), "--log_level", "error"}
	if o.Tokenizer != "" {
		argv = append(argv, "--tokenizer", o.Tokenizer)
	}
	if o.TRTLLMMaxBatchSize > 0 {
		argv = append(argv, "--max_batch_size", strconv.Itoa(o.TRTLLMMaxBatchSize))
	}
	if o.TRTLLMExtraLLMAPIOptions != "" {
		argv = append(argv, "--extra_llm_api_options", o.TRTLLMExtraLLMAPIOptions)
	}
	return append(argv, extra...), nil
}

// trtllmEnv adds TensorRT-LLM's own variable to the process environment:
// TLLM_WORKER_USE_SINGLE_PROCESS=1 with the flag; without it the original
// removed the variable, which an empty value does for TensorRT-LLM's "== 1"
// test.
func trtllmEnv(env map[string]string, o *ThirdPartyOptions, r ThirdPartyRun) {
	const key = "TLLM_WORKER_USE_SINGLE_PROCESS"
	if o.TRTLLMWorkerSingleProcess {
		env[key] = "1"
	} else if r.getenv(key) != "" {
		env[key] = ""
	}
}

// TRTLLM is the spec of a trtllm-serve server run from its environment.
// Besides the process group, it is stopped by port: trtllm-serve may move
// its server into a new session, out of the group the harness signals.
func TRTLLM(ctx context.Context, o *ThirdPartyOptions, r ThirdPartyRun) (Spec, error) {
	if _, err := TRTLLMArgv(o, r, "127.0.0.1", 1); err != nil {
		return Spec{}, err
	}
	pb, err := resolvePython(ctx, NameTRTLLM, o.TRTLLMPython, r)
	if err != nil {
		return Spec{}, err
	}
	trtllmEnv(pb.procEnv, o, r)
	s := pythonSpec(NameTRTLLM, pb, trtllmQuirks, func(host string, port int) []string {
		argv, _ := TRTLLMArgv(o, r, host, port)
		return argv
	})
	s.AfterStop = func(_ string, port int) { StopByPort(port, trtllmServeMarker, 20*time.Second) }
	s.APIKey = r.APIKey // sent, though trtllm-serve has no --api-key to require it
	return s, nil
}

// StopByPort ends what is left of a server after its process group was
// stopped, as the original did for TensorRT-LLM: every process listening on
// port, and every process whose command line holds marker and the port as
// an argument, with their children. SIGTERM first, up to grace for the port
// to stop listening, then SIGKILL. It returns the pids it signalled. Linux
// only (it reads /proc); elsewhere it does nothing.
func StopByPort(port int, marker string, grace time.Duration) []int {
	targets := serverProcesses(port, marker)
	if len(targets) == 0 {
		return nil
	}
	tree := withDescendants(targets)
	for i := len(tree) - 1; i >= 0; i-- { // children first
		syscall.Kill(tree[i], syscall.SIGTERM)
	}
	deadline := time.Now().Add(grace)
	for time.Now().Before(deadline) && anyAlive(tree) {
		time.Sleep(100 * time.Millisecond)
	}
	for _, pid := range tree {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	return tree
}

// serverProcesses finds the pids StopByPort signals (never this process).
func serverProcesses(port int, marker string) []int {
	inodes := listeningInodes(port)
	self := os.Getpid()
	var pids []int
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil || pid == self {
			continue
		}
		if holdsSocket(pid, inodes) || cmdlineMatches(pid, marker, port) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// listeningInodes are the socket inodes in LISTEN state on port, from
// /proc/net/tcp and tcp6 (columns: sl, local address:port in hex, remote,
// state 0A = LISTEN, ..., inode in the tenth column).
func listeningInodes(port int) map[string]bool {
	inodes := map[string]bool{}
	want := fmt.Sprintf(":%04X", port)
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		f, err := os.Open(table)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Scan() // header
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) < 10 || fields[3] != "0A" || !strings.HasSuffix(fields[1], want) {
				continue
			}
			inodes["socket:["+fields[9]+"]"] = true
		}
		f.Close()
	}
	return inodes
}

func holdsSocket(pid int, inodes map[string]bool) bool {
	if len(inodes) == 0 {
		return false
	}
	dir := filepath.Join("/proc", strconv.Itoa(pid), "fd")
	fds, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, fd := range fds {
		if link, err := os.Readlink(filepath.Join(dir, fd.Name())); err == nil && inodes[link] {
			return true
		}
	}
	return false
}

// cmdlineMatches: marker appears in the command line and the port is one
// of its arguments (alone or as --port=N).
func cmdlineMatches(pid int, marker string, port int) bool {
	if marker == "" {
		return false
	}
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	if err != nil || !strings.Contains(string(data), marker) {
		return false
	}
	p := strconv.Itoa(port)
	for _, arg := range strings.Split(string(data), "\x00") {
		if arg == p || strings.HasSuffix(arg, "="+p) {
			return true
		}
	}
	return false
}

// withDescendants returns roots followed by all their descendants
// (parents before children), read from /proc/<pid>/stat.
func withDescendants(roots []int) []int {
	children := map[int][]int{}
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		if ppid := parentPID(pid); ppid > 0 {
			children[ppid] = append(children[ppid], pid)
		}
	}
	seen := map[int]bool{}
	var out []int
	var walk func(int)
	walk = func(pid int) {
		if seen[pid] {
			return
		}
		seen[pid] = true
		out = append(out, pid)
		for _, c := range children[pid] {
			walk(c)
		}
	}
	for _, r := range roots {
		walk(r)
	}
	return out
}

// parentPID reads field 4 of /proc/<pid>/stat; the command name (field 2)
// is in parentheses and may hold spaces, so parsing starts after its ')'.
func parentPID(pid int) int {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0
	}
	i := strings.LastIndexByte(string(data), ')')
	if i < 0 {
		return 0
	}
	fields := strings.Fields(string(data[i+1:]))
	if len(fields) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(fields[1])
	return ppid
}

// anyAlive reports whether any pid still exists and is not a zombie.
func anyAlive(pids []int) bool {
	for _, pid := range pids {
		data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
		if err != nil {
			continue
		}
		if i := strings.LastIndexByte(string(data), ')'); i >= 0 && i+2 < len(data) && data[i+2] != 'Z' {
			return true
		}
	}
	return false
}
