package friendlyname

import "testing"

// deriveCases pairs command lines, as procscan hands them over, with their
// friendly names. The fuzz test seeds its corpus from them too.
var deriveCases = []struct {
	line, want string
}{
	// The seed's own examples.
	{"taskset -c 0-3 timeout 600 python3 run.py", "run.py"},
	{"/home/ci/venv/bin/python3 /home/ci/src/train.py --epochs 3", "train.py"},
	{"/home/ci/venv/bin/pytest tests/ops/test_matmul.py::test_matmul[bf16-64]", "test_matmul.py"},
	{"python3 -m a.b.cli serve --port 8080", "a.b.cli"},
	{"/opt/venv/bin/python3 /opt/venv/bin/tt-smi -r 0", "tt-smi"},
	{"python3 -c import time; time.sleep(60)", "python -c"},
	{"pytest a/b/test_x.py::TestC::test_y[params]", "test_x.py"},
	{"pytest a/b/c/", "c"},
	{"pytest", "pytest"},
	{"", "<unknown>"},

	// Rule 4: plain programs.
	{"/usr/local/bin/tt-metal-server --port 1", "tt-metal-server"},
	{"./build/test/ttnn_unit_tests --gtest_filter=*", "ttnn_unit_tests"},
	{"bash ./run_all.sh", "bash"},
	{"a/b/", "b"},
	{"/", "/"},
	{"//", "/"},
	{"   ", "<unknown>"},
	{"  spaced   out  ", "spaced"},
	{"kworker/0:1", "0:1"}, // a comm value is procscan's to keep as-is, not Derive's
	{"-", "-"},

	// Rule 1: assignments.
	{"A=1 B=2 ./prog --flag", "prog"},
	{"TT_METAL_HOME=/opt/tt _X9=y python3 x.py", "x.py"},
	{"EMPTY= prog", "prog"},
	{"A=1 prog B=2 C=3", "prog"},      // an assignment after the program is an argument
	{"1A=x prog", "1A=x"},             // not a shell identifier: that is the program
	{"A-B=1 prog", "A-B=1"},           // likewise
	{"A=1 B=/usr/lib", "A=1"},         // nothing but assignments
	{"PATH=/usr/bin", "bin"},          // ditto: rule 4 on the first token
	{"nice A=1 python3 y.py", "y.py"}, // assignments are peeled after launchers too

	// sudo.
	{"sudo python3 x.py", "x.py"},
	{"/usr/bin/sudo -u alice -E python3 x.py", "x.py"},
	{"sudo -EH -u alice prog", "prog"},
	{"sudo -ualice prog", "prog"},
	{"sudo --user=alice --group wheel prog", "prog"},
	{"sudo --us alice prog", "prog"}, // getopt_long takes a unique prefix
	{"sudo -g wheel -C 5 -D /tmp -p pw: -r role -t type -T 60 -R /srv -c cls prog", "prog"},
	{"sudo -nu alice prog", "prog"}, // u ends the cluster and takes the next token
	{"sudo -h host prog", "prog"},
	{"sudo -hhost prog", "prog"},
	{"sudo -h", "sudo"},
	{"sudo -h -u alice prog", "sudo"}, // -h before an option asks for help
	{"sudo --help", "sudo"},
	{"sudo -l prog", "sudo"},
	{"sudo -v", "sudo"},
	{"sudo -K", "sudo"},
	{"sudo -e /etc/hosts", "sudo"},
	{"sudo -u alice", "sudo"},
	{"sudo A=1 -u alice B-C=2 prog", "prog"}, // sudo's own envars mix with its options
	{"sudo --preserve-env=PATH,HOME prog", "prog"},
	{"sudo --preserve-env prog", "prog"},
	{"sudo -- -weird", "-weird"},
	{"sudo -s", "sudo"},
	{"sudo -i python3 x.py", "x.py"},

	// env.
	{"/usr/bin/env python3 x.py", "x.py"},
	{"env -i -u X -C /tmp A=1 prog", "prog"},
	{"env -iu X prog", "prog"},
	{"env -uX -CX prog", "prog"},
	{"env --unset=X --chdir /tmp prog", "prog"},
	{"env - A=1 prog", "prog"},
	{"env A=1 B-C=2 ./d=e prog", "prog"}, // env takes any operand with '=' as an assignment
	{"env -S python3 -u x.py", "x.py"},   // #!/usr/bin/env -S python3 -u
	{"env -Spython3 x.py", "x.py"},
	{"env -Spython -c0", "python -c"},   // found by FuzzDerive: the interpreter is -S's value
	{"env -S-Spython -c0", "python -c"}, // found by FuzzDerive in CI: -S's value is a -S again, split once more
	{"env -iS A=1 python3 x.py", "x.py"},
	{"env --split-string=python3 x.py", "x.py"},
	{"env -S -i python3 x.py", "x.py"}, // the split string goes on with env's options
	{"env --ignore-signal --default-signal=PIPE -v -0 prog", "prog"},
	{"env -a name prog", "prog"},
	{"env", "env"},
	{"env A=1", "env"},
	{"env --version", "env"},

	// nohup, stdbuf.
	{"nohup python3 x.py", "x.py"},
	{"nohup", "nohup"},
	{"nohup -- prog", "prog"},
	{"nohup --help", "nohup"},
	{"stdbuf -oL -e 0 prog", "prog"},
	{"stdbuf -o L -i0 prog", "prog"},
	{"stdbuf --output=L --error 0 prog", "prog"},
	{"stdbuf -oL", "stdbuf"},

	// taskset.
	{"taskset 0x3 prog", "prog"},
	{"taskset -c 0-3 prog", "prog"},
	{"taskset -ac 0,2 prog", "prog"},
	{"taskset --cpu-list 1 prog", "prog"},
	{"taskset -- 0x3 prog", "prog"},
	{"taskset -p 1234", "taskset"},
	{"taskset -pc 0-3 1234", "taskset"},
	{"taskset -c 0-3", "taskset"},

	// numactl.
	{"numactl --cpunodebind=0 -m 0 -N0 -l prog", "prog"},
	{"numactl --membind 1 --physcpubind=0-7 prog", "prog"},
	{"numactl -C 0-3 --interleave=all prog", "prog"},
	{"numactl --preferred=1 --cpunode=0 prog", "prog"}, // prefix of --cpunodebind
	{"numactl -a -i all prog", "prog"},
	{"numactl --hardware", "numactl"},
	{"numactl -s", "numactl"},

	// timeout.
	{"timeout 600 prog", "prog"},
	{"timeout -s KILL -k 5 600 prog", "prog"},
	{"timeout -sKILL -k5 1h prog", "prog"},
	{"timeout --signal=TERM --kill-after 10 5m prog", "prog"},
	{"timeout --foreground --preserve-status -v 10 prog", "prog"},
	{"timeout -f -p 10 prog", "prog"},
	{"timeout 10", "timeout"},

	// nice.
	{"nice prog", "prog"},
	{"nice -n 10 prog", "prog"},
	{"nice -n10 prog", "prog"},
	{"nice -10 prog", "prog"},
	{"nice --10 prog", "prog"},
	{"nice -+5 prog", "prog"},
	{"nice --adjustment=5 prog", "prog"},
	{"nice --adj 5 prog", "prog"},
	{"nice -5 -n 3 prog", "prog"},
	{"nice", "nice"},

	// ionice.
	{"ionice -c2 -n7 prog", "prog"},
	{"ionice -c 3 prog", "prog"},
	{"ionice --class idle -t prog", "prog"},
	{"ionice --class=best-effort --classdata=4 prog", "prog"},
	{"ionice -c3 -p 1234", "ionice"},
	{"ionice -P 77 78", "ionice"},
	{"ionice -u 1000", "ionice"},

	// Launcher chains.
	{"sudo -u ci env A=1 taskset -c 0 nice -n 5 python3 x.py", "x.py"},
	{"nohup timeout 3600 numactl -N 0 stdbuf -oL ionice -c3 ./bench", "bench"},
	{"sudo env", "env"},
	{"sudo nohup", "nohup"},
	{"timeout 5 sudo -u alice", "sudo"},

	// Rule 2: Python interpreters.
	{"python x.py", "x.py"},
	{"python3.12 x.py", "x.py"},
	{"/usr/bin/python3.11d x.py", "x.py"},
	{"python3.13t x.py", "x.py"},
	{"pypy x.py", "x.py"},
	{"/opt/pypy3.10/bin/pypy3 -m mod", "mod"},
	{"/home/u/.venv/bin/python3 /home/u/proj/scripts/eval.py", "eval.py"},
	{"python3 -u -B -E -I -O -OO -s -S -v -q -b -bb -d -i -P -R -x x.py", "x.py"},
	{"python3 -uBs x.py", "x.py"},
	{"python3 -W ignore -X dev x.py", "x.py"},
	{"python3 -Wignore::DeprecationWarning -Xfrozen_modules=off x.py", "x.py"},
	{"python3 -uW error x.py", "x.py"},
	{"python3 --check-hash-based-pycs always x.py", "x.py"},
	{"python3 --check-hash-based-pycs=never x.py", "x.py"},
	{"python3 -- x.py", "x.py"},
	{"python3 -m a.b.cli", "a.b.cli"},
	{"python3 -ma.b.cli", "a.b.cli"},
	{"python3 -um torch.distributed.run --nproc_per_node 8 train.py", "torch.distributed.run"},
	{"python3 -u -m http.server 8000", "http.server"},
	{"python3 -c pass", "python -c"},
	{"python3 -uc pass", "python -c"},
	{"python3 -cpass", "python -c"},
	{"python3 -W ignore -c pass", "python -c"},
	{"python3 -cm x", "python -c"}, // the code is "m"
	{"python3 -mc x", "c"},         // the module is "c"
	{"python3", "python3"},
	{"python3 -", "python3"},
	{"python3 -u - arg", "python3"},
	{"python3 -- -", "python3"},
	{"python3 -m", "python3"},
	{"python3 -c", "python3"},
	{"python3 -W", "python3"},
	{"python3 --version", "python3"},
	{"python3 -V", "python3"},
	{"python3 -h x.py", "python3"},
	{"python3 -i", "python3"},
	{"python3-config --libs", "python3-config"}, // not an interpreter
	{"pythonista x.py", "pythonista"},
	{"python3.12-dbg x.py", "python3.12-dbg"},
	{"python3 python3 x.py", "python3"}, // the script is a file named python3

	// Rule 3: pytest.
	{"pytest -x -q tests/unit/test_foo.py", "test_foo.py"},
	{"py.test tests/test_a.py", "test_a.py"},
	{"py.test -v", "pytest"}, // py.test is pytest, whose name it takes
	{"pytest-3 tests/test_a.py", "test_a.py"},
	{"pytest-3 -q", "pytest"},
	{"/usr/bin/pytest-3.11 -x tests/", "tests"},
	{"/venv/bin/pytest", "pytest"},
	{"python3 -m pytest", "pytest"},
	{"python3 -mpytest -v", "pytest"},
	{"python3 -m pytest tests/test_b.py::test_c", "test_b.py"},
	{"python3 -m py.test tests/x/", "x"},
	{"python3 /venv/bin/pytest tests/", "tests"},
	{"python3 -u /venv/bin/py.test -x", "pytest"},
	{"pytest tests/test_x.py::T::t[a b]", "test_x.py"}, // params with a space
	{"pytest ::weird", "::weird"},
	{"pytest -k slow tests/t.py", "t.py"},
	{"pytest -kslow tests/t.py", "t.py"},
	{"pytest -k=slow tests/t.py", "t.py"},
	{"pytest -k not slow tests/t.py", "t.py"},
	{"pytest -knot slow tests/t.py", "t.py"},
	{"pytest -k a and not b tests/t.py", "t.py"},
	{"pytest -k a or b and c tests/t.py", "t.py"},
	{"pytest -k not not a tests/t.py", "t.py"},
	{"pytest -k (a or b) and not c tests/t.py", "t.py"},
	{"pytest -k not (a or (b and c)) tests/t.py", "t.py"},
	{"pytest -k ( a or b ) tests/t.py", "t.py"},
	{"pytest -m not slow and not gpu tests/t.py", "t.py"},
	{"pytest -vm smoke tests/t.py", "t.py"},
	{"pytest -k a and", "pytest"},
	{"pytest -k", "pytest"},
	{"pytest -p no:cacheprovider -pno:randomly tests/t.py", "t.py"},
	{"pytest -n 4 -n4 -nauto tests/t.py", "t.py"},
	{"pytest -c setup.cfg -o addopts= -W error -r fE -rA tests/t.py", "t.py"},
	{"pytest --rootdir /src --basetemp=/tmp/x --confcutdir . tests/t.py", "t.py"},
	{"pytest --junitxml out.xml --junit-xml=o.xml --durations 10 --maxfail=2 tests/t.py", "t.py"},
	{"pytest --tb short --log-level DEBUG --log-cli-level=INFO --log-file l.txt tests/t.py", "t.py"},
	{"pytest --ignore tests/slow --ignore-glob=*_big.py --deselect tests/t.py::x tests/u.py", "u.py"},
	{"pytest --override-ini xfail_strict=true --import-mode importlib --capture no tests/t.py", "t.py"},
	{"pytest --timeout 300 --dist loadscope --cov-report term tests/t.py", "t.py"},
	{"pytest --cov src tests/t.py", "t.py"},
	{"pytest --cov --cov-report=xml tests/t.py", "t.py"},
	{"pytest --cov tests/t.py", "pytest"}, // argparse hands tests/t.py to --cov
	{"pytest --debug tests/t.py", "pytest"},
	{"pytest --lf --ff --sw -vvs --tb=line tests/t.py", "t.py"},
	{"pytest -xk slow tests/t.py", "t.py"},
	{"pytest -- -odd_test.py", "-odd_test.py"},
	{"pytest --", "pytest"},
	{"pytest tests/a.py tests/b.py", "a.py"},
	{"sudo env A=1 taskset -c 0 nice -n 5 python3 -m pytest -k a and not b tests/x/test_y.py::T::t", "test_y.py"},
	{"timeout 3600 /venv/bin/python3 -u -m pytest -n 8 --timeout=600 tests/ttnn/unit_tests/", "unit_tests"},
}

func TestDerive(t *testing.T) {
	t.Parallel()
	for _, tc := range deriveCases {
		t.Run(tc.line, func(t *testing.T) {
			t.Parallel()
			if got := Derive(tc.line); got != tc.want {
				t.Errorf("Derive(%q) = %q, want %q", tc.line, got, tc.want)
			}
		})
	}
}
