#!/usr/bin/python3
"""gyre-train --elastic under gyrerun --elastic, as a user runs it (ctest harness_elastic).

    elastic_test.py GYRERUN GYRE_TRAIN

On train_cli_test.py's generated corpus and small model, 4 ranks, a
checkpoint every 5 of 30 steps, the process that started as rank 2 killed
with SIGKILL as step 12 begins (GYRE_TRAIN_KILL_RANK):

1. with a replacement (gyrerun restarts the process; it joins at the next
   checkpoint boundary): the job succeeds, every step is logged once, the
   final loss is within 1% of the uninterrupted run's, and the output says
   who was lost, when, how many go on from which checkpoint, and who joined
   as which rank;
2. without one (--max-restarts 0): the 3 survivors finish, within 1% too;
3. below --elastic's minimum the job fails, naming the minimum;
4. flags that cannot work are refused, naming the flag.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train_cli_test as cli  # noqa: E402  (the corpus and the model)

GYRERUN = GYRE_TRAIN = TMP = CORPUS = ""
STEPS = 30
ARGS = ["--layers", "2", "--dim", "32", "--heads", "4", "--seq", "32", "--batch", "12",
        "--steps", str(STEPS), "--checkpoint-every", "5"]


def run(gyrerun_args, train_args, env=None):
    cmd = [GYRERUN, "-n", "4", "--timeout", "200"] + gyrerun_args + [GYRE_TRAIN, "--data", CORPUS] + train_args
    full_env = dict(os.environ)
    full_env.update(env or {})
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=full_env, cwd=TMP,
                       timeout=240)
    return p.returncode, p.stdout.decode("utf-8", "replace")


def losses(log):
    """Every step line of a log, as (step, loss) in file order."""
    with open(os.path.join(TMP, log)) as f:
        return [(r["step"], r["loss"]) for r in map(json.loads, f) if "step" in r]


KILL = {"GYRE_TRAIN_KILL_RANK": "2:12"}


class Elastic(unittest.TestCase):
    reference = None

    @classmethod
    def setUpClass(cls):
        status, out = run([], ARGS + ["--checkpoint-dir", "ref", "--log", "ref.jsonl"])
        if status != 0:
            raise AssertionError("the uninterrupted run failed (%d):\n%s" % (status, out))
        cls.reference = dict(losses("ref.jsonl"))

    def check_run(self, log, out):
        got = losses(log)
        self.assertEqual([s for s, _ in got], list(range(STEPS)), out)  # each step once, in order
        last = got[-1][1]
        want = self.reference[STEPS - 1]
        self.assertLess(abs(last - want), 0.01 * want, (last, want, out))

    def test_a_killed_rank_is_replaced_at_the_next_checkpoint(self):
        status, out = run(["--elastic", "2:4"], ARGS + ["--elastic", "2:4", "--checkpoint-dir", "a",
                                                        "--log", "a.jsonl"], KILL)
        self.assertEqual(status, 0, out)
        self.check_run("a.jsonl", out)
        for said in ["the process started as rank 2 kills itself as step 12 begins",
                     "rank 2 (pid", "starting a replacement that joins the others (restart 1 of 3)",
                     "lost rank 2 of 4 (", "exited", "3 ranks remain",
                     "step 10: 3 ranks (dp 3 x tp 1 x pp 1) go on from the checkpoint of step 10",
                     "asks to join at the next checkpoint boundary",
                     "at the checkpoint of step 15: ", "as rank 3 joins", "joined as rank 3 of 4",
                     "step 15: 4 ranks (dp 4 x tp 1 x pp 1) go on from the checkpoint of step 15"]:
            self.assertIn(said, out)

    def test_without_a_replacement_the_survivors_finish(self):
        status, out = run(["--elastic", "2:4", "--max-restarts", "0"],
                          ARGS + ["--elastic", "2:4", "--checkpoint-dir", "b", "--log", "b.jsonl"], KILL)
        self.assertEqual(status, 0, out)
        self.check_run("b.jsonl", out)
        self.assertIn("no restarts left (--max-restarts 0): the other 3 ranks go on", out)
        self.assertIn("lost rank 2 of 4", out)
        self.assertNotIn("joins", out)

    def test_below_the_minimum_the_run_fails(self):
        status, out = run(["--elastic", "3:4", "--max-restarts", "0"],
                          ARGS + ["--elastic", "4:4", "--checkpoint-dir", "c"], KILL)
        self.assertNotEqual(status, 0, out)
        self.assertIn("3 ranks remain, fewer than --elastic's minimum 4", out)

    def test_flags_that_cannot_work(self):
        model = ["--layers", "2", "--dim", "32", "--heads", "4", "--seq", "32", "--steps", "2"]
        saves = ["--checkpoint-dir", "d", "--checkpoint-every", "5"]
        for extra, named in [(["--elastic", "2:4"], "needs --checkpoint-dir and --checkpoint-every"),
                             (["--elastic", "2:4", "--checkpoint-dir", "d"], "needs --checkpoint-dir and"),
                             (["--elastic", "4:2"] + saves, "MIN is above MAX"),
                             (["--elastic", "2"] + saves, "takes MIN:MAX"),
                             (["--elastic", "2:4", "--tp", "2"] + saves, "no --dp, --sp, --tp"),
                             (["--elastic", "2:4", "--batch", "8"] + saves, "--batch 8 does not split into 3 ranks")]:
            status, out = run([], model + extra)
            self.assertEqual(status, 2, out)
            self.assertIn(named, out)
        p = subprocess.run([GYRERUN, "-n", "4", "--elastic", "1:3", GYRE_TRAIN], cwd=TMP, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT)
        self.assertEqual(p.returncode, 2)
        self.assertIn("-n 4 is outside --elastic 1:3", p.stdout.decode())


def main():
    global GYRERUN, GYRE_TRAIN, TMP, CORPUS
    if len(sys.argv) != 3:
        print("usage: elastic_test.py GYRERUN GYRE_TRAIN", file=sys.stderr)
        return 2
    GYRERUN, GYRE_TRAIN = (os.path.abspath(p) for p in sys.argv[1:])
    TMP = tempfile.mkdtemp(prefix="gyre-elastic-")
    os.environ["TMPDIR"] = TMP  # the token file goes there
    CORPUS = os.path.join(TMP, "corpus.txt")
    cli.make_corpus(CORPUS)
    try:
        result = unittest.main(argv=[sys.argv[0], "-v"], exit=False).result
    finally:
        shutil.rmtree(TMP, ignore_errors=True)
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
