package friendlyname

import "testing"

// benchLines is a realistic mix of what holds a Tenstorrent device: plain
// binaries, virtualenv scripts, pytest runs with options, launcher chains.
var benchLines = []string{
	"/usr/local/bin/tt-metal-server --port 5555",
	"./build/test/tt_metal/unit_tests_api --gtest_filter=DeviceFixture.*",
	"/home/ci/.venv/bin/python3 /home/ci/.venv/bin/tt-smi -r 0,1",
	"/home/ci/.venv/bin/python3 /home/ci/src/models/demo/train.py --epochs 3 --batch 32",
	"python3 -m ttnn.tools.profiler --device 0",
	"python3 -u -c import ttnn; ttnn.open_device(0)",
	"/home/ci/.venv/bin/pytest tests/ttnn/unit_tests/operations/test_matmul.py::test_matmul[bf16-1024]",
	"/home/ci/.venv/bin/python3 -m pytest -x -q --timeout=600 -n 8 tests/ttnn/unit_tests/",
	"pytest -k test_conv and not slow -m not nightly --tb=short tests/ops/test_conv2d.py",
	"python3 /home/ci/.venv/bin/pytest -p no:cacheprovider --junitxml out.xml tests/",
	"taskset -c 0-3 timeout 600 python3 run.py",
	"sudo -u ci env TT_METAL_HOME=/opt/tt nice -n 5 python3 -m pytest tests/test_x.py::T::t",
	"numactl --cpunodebind=0 --membind=0 /opt/tt/bin/bench --iterations 1000",
	"nohup stdbuf -oL /home/ci/.venv/bin/python3 serve.py --host 127.0.0.1",
	"TT_LOGGER_LEVEL=debug ARCH_NAME=wormhole_b0 ./build/programming_examples/add_2_integers",
	"timeout -s KILL -k 5 3600 ionice -c3 /home/ci/.venv/bin/python3 -W ignore eval.py",
	"env -S python3 -u /opt/tools/reset_cards.py",
	"/usr/bin/python3.12 /usr/lib/python3/dist-packages/tt_tools/monitor.py",
	"bash /home/ci/run_nightly.sh",
	"python3",
}

// BenchmarkDerive reports the cost of naming one command line; Derive works
// on substrings of its input and should allocate nothing.
func BenchmarkDerive(b *testing.B) {
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		Derive(benchLines[i])
		i++
		if i == len(benchLines) {
			i = 0
		}
	}
}
