package friendlyname

import "testing"

// pytestCorpus is pytest command lines as they are run on hosts with
// Tenstorrent cards and in CI generally: conftest options of the kind
// tt-metal-style projects define (a device id, a model variant), xdist,
// pytest-benchmark, pytest-timeout, asyncio and html plugins, with the
// options in every position. None of these options is in the built-in
// table: the general rule has to get past them. An unknown long option
// may take the next token as its value, so a following token is taken as
// the target only when it looks like one (a path ending in .py, a "::" node
// ID, a directory with a trailing slash); a path with a slash is the
// fallback; a bare word after such an option is its value.
var pytestCorpus = []struct {
	line, want string
}{
	{"pytest --device-id 0 tests/ttnn/test_add.py", "test_add.py"},
	{"pytest --benchmark-json out.json tests/bench/test_matmul.py", "test_matmul.py"},
	{"pytest --benchmark-json out.json --benchmark-min-rounds 5 tests/bench/test_matmul.py::test_bf16", "test_matmul.py"},
	{"python3 -m pytest --device-id=1 models/demos/wormhole/resnet50/tests/test_perf.py -k batch_16", "test_perf.py"},
	{"pytest tests/ttnn/unit_tests/operations/test_softmax.py --device-id 0", "test_softmax.py"},
	{"pytest --model-variant llama3-8b --num-devices 8 tests/models/test_llama.py::test_decode[b32]", "test_llama.py"},
	{"pytest -n auto --dist loadfile --device-id 2 tests/tt_eager/python_api_testing/", "python_api_testing"},
	{"pytest -p xdist -n 4 --max-worker-restart 0 --tx popen//python=python3 tests/test_x.py", "test_x.py"},
	{"pytest --timeout 600 --timeout-method thread --benchmark-disable tests/test_y.py", "test_y.py"},
	{"pytest --asyncio-mode auto tests/async/test_stream.py", "test_stream.py"},
	{"pytest --asyncio-mode=strict tests/async/", "async"},
	{"pytest --html report.html --self-contained-html tests/test_z.py", "test_z.py"},
	{"pytest --splits 8 --group 3 --splitting-algorithm least_duration tests/", "tests"},
	{"pytest --runslow tests/test_slow.py", "test_slow.py"},
	{"pytest --runslow", "pytest"},
	{"pytest --device-id 0", "pytest"},
	{"pytest --results-dir out/run1 --device-id 0", "run1"},
	{"pytest --results-dir out/run1 tests/test_q.py", "test_q.py"},
	{"python3 -m pytest -svv --durations 0 --timeout 3000 tests/nightly/single_card/stable_diffusion/test_perf.py", "test_perf.py"},
	{"pytest-3 --device-id 0 tests/test_a.py", "test_a.py"},
	{"py.test --benchmark-json out.json", "pytest"},
	{"env TT_METAL_HOME=/src ARCH_NAME=wormhole_b0 pytest --device-id 0 tests/ttnn/test_add.py::test_add[shape0]", "test_add.py"},
}

func TestDerive_PytestCorpus(t *testing.T) {
	t.Parallel()
	for _, tc := range pytestCorpus {
		t.Run(tc.line, func(t *testing.T) {
			t.Parallel()
			if got := Derive(tc.line); got != tc.want {
				t.Errorf("Derive(%q) = %q, want %q", tc.line, got, tc.want)
			}
		})
	}
}
