#!/usr/bin/python3
"""gyre-train end to end, as a user runs it (ctest harness_train_cli).

    train_cli_test.py GYRERUN GYRE_TRAIN

On a generated corpus and a small model, under gyrerun with 4 ranks:

1. save, kill, resume on the same mesh: the resumed run's losses are the
   uninterrupted run's, bit for bit (GYRE_TRAIN_KILL_AFTER_STEP makes every
   rank _Exit(137) right after step 10 and its checkpoint);
2. resume on another mesh (dp4, tp4, pp2 x dp2, sp2 x dp2): within 1e-5 relative;
3. damaged checkpoints (a truncated, corrupted or deleted shard, a deleted
   index, an empty directory, another model's index) are errors naming the
   file or the field, with a non-zero status and no step trained after them;
   a step without its index is passed over for the newest complete one;
4. --plot writes SVG and PNG, draws earlier logs, and bad flags exit 2 naming
   the flag;
5. --flexsp learns, names its plans, and resumes bit for bit.

Standard library only; each check prints a line, the first failure ends the
test with its output.
"""

import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

GYRERUN = GYRE_TRAIN = ""
MODEL = ["--layers", "2", "--dim", "32", "--heads", "4", "--seq", "32", "--batch", "8"]
STEPS = 20
SAVE_MESH = ["--dp", "2", "--tp", "2", "--zero", "1"]
TMP = ""
CORPUS = ""


def make_corpus(path, size=48 * 1024):
    """Sentences of English-like words with punctuation, numbers and line
    breaks: varied enough that 20 steps see no repeated batch pattern."""
    rng = random.Random(7)
    words = ("the a of to and in is it that for on with as was be by this are or from at "
             "file buffer window text line word command mode insert normal visual search "
             "replace undo redo register macro option syntax color tab split quit write "
             "read edit yank put delete change move cursor screen scroll jump mark fold "
             "indent format complete pattern match count range motion operator object").split()
    out = []
    n = 0
    while n < size:
        sentence = " ".join(rng.choice(words) for _ in range(rng.randint(4, 14)))
        sentence = sentence[0].upper() + sentence[1:]
        if rng.random() < 0.2:
            sentence += " %d" % rng.randint(0, 999)
        sentence += rng.choice([".", ".", ".", "?", "!", ":", ";"])
        sentence += "\n" if rng.random() < 0.25 else " "
        out.append(sentence)
        n += len(sentence)
    with open(path, "w") as f:
        f.write("".join(out))


def run(args, ranks=4, env=None, timeout=240):
    """gyrerun -n ranks gyre-train args: (status, stdout + stderr)."""
    cmd = [GYRERUN, "-n", str(ranks), "--timeout", "200", GYRE_TRAIN] + args
    full_env = dict(os.environ)
    full_env.update(env or {})
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=full_env,
                       cwd=TMP, timeout=timeout)
    return p.returncode, p.stdout.decode("utf-8", "replace")


def train(args, ranks=4, env=None):
    return run(["--data", CORPUS] + MODEL + ["--steps", str(STEPS)] + args, ranks, env)


def losses(log):
    """{step: loss} of a JSON-lines log (its config line skipped)."""
    out = {}
    with open(os.path.join(TMP, log)) as f:
        for line in f:
            record = json.loads(line)
            if "step" in record:
                out[record["step"]] = record["loss"]
    return out


def progress_lines(output):
    return re.findall(r"step \d+/%d " % STEPS, output)


class TrainCli(unittest.TestCase):
    # The uninterrupted run and the killed one's checkpoints, made once.
    reference = {}
    killed_dir = "killed"

    @classmethod
    def setUpClass(cls):
        status, out = train(SAVE_MESH + ["--log", "a.jsonl", "--plot", "a.svg"])
        if status != 0:
            raise AssertionError("the uninterrupted run failed (%d):\n%s" % (status, out))
        cls.reference = losses("a.jsonl")
        assert sorted(cls.reference) == list(range(STEPS)), cls.reference
        cls.kill_status, cls.kill_output = train(
            SAVE_MESH + ["--checkpoint-dir", cls.killed_dir, "--checkpoint-every", "5",
                         "--log", "b.jsonl"],
            env={"GYRE_TRAIN_KILL_AFTER_STEP": "10"})

    def copy_checkpoints(self, name):
        """A fresh copy of the killed run's checkpoints (step-5 and step-10)."""
        dst = os.path.join(TMP, name)
        shutil.rmtree(dst, ignore_errors=True)
        shutil.copytree(os.path.join(TMP, self.killed_dir), dst)
        return name

    def expect_resumed_from(self, out, directory, step):
        want = "gyre-train: resumed from %s/step-%d at step %d" % (directory, step, step)
        self.assertIn(want, out)

    def expect_error(self, args, parts, directory, ranks=4):
        """A failed resume: non-zero status, every part in the output, no
        step trained and no checkpoint written after it."""
        before = sorted(os.listdir(os.path.join(TMP, directory)))
        status, out = train(args + ["--checkpoint-dir", directory, "--resume"], ranks)
        self.assertNotEqual(status, 0, out)
        for part in parts:
            self.assertIn(part, out)
        self.assertEqual(progress_lines(out), [], "trained after the error:\n" + out)
        self.assertNotIn("resumed from", out)
        self.assertEqual(sorted(os.listdir(os.path.join(TMP, directory))), before,
                         "the failed run wrote checkpoints:\n" + out)
        return out

    # 1. Save, kill, resume on the same mesh.

    def test_kill_was_abrupt_after_step_10(self):
        self.assertEqual(self.kill_status, 137, self.kill_output)
        steps = sorted(os.listdir(os.path.join(TMP, self.killed_dir)))
        self.assertEqual(steps, ["step-10", "step-5"])
        self.assertIn("step 10/20", self.kill_output)
        self.assertNotIn("step 20/20", self.kill_output)
        self.assertNotIn("saved", self.kill_output)
        # The killed run's log holds the steps it finished, as the reference.
        self.assertEqual(losses("b.jsonl"), {s: self.reference[s] for s in range(10)})

    def test_resume_same_mesh_is_bitwise(self):
        d = self.copy_checkpoints("same")
        status, out = train(SAVE_MESH + ["--checkpoint-dir", d, "--resume", "--log", "c.jsonl",
                                         "--plot", "c.png"])
        self.assertEqual(status, 0, out)
        self.expect_resumed_from(out, d, 10)
        got = losses("c.jsonl")
        self.assertEqual(sorted(got), list(range(10, STEPS)))
        for step, loss in got.items():
            self.assertEqual(loss, self.reference[step], "step %d" % step)
        self.assertTrue(os.path.exists(os.path.join(TMP, d, "step-20", "index.json")))

    def test_resume_continues_its_log(self):
        """--resume with the killed run's own log: the steps the checkpoint
        covers stay, the rest follow, one run line: the whole run's log."""
        d = self.copy_checkpoints("continued")
        shutil.copy(os.path.join(TMP, "b.jsonl"), os.path.join(TMP, "continued.jsonl"))
        status, out = train(SAVE_MESH + ["--checkpoint-dir", d, "--resume",
                                         "--log", "continued.jsonl"])
        self.assertEqual(status, 0, out)
        self.assertNotIn("settings differ", out)
        self.assertEqual(losses("continued.jsonl"), self.reference)
        with open(os.path.join(TMP, "continued.jsonl")) as f:
            lines = f.read().splitlines()
        self.assertEqual(len(lines), 1 + STEPS)
        self.assertTrue(lines[0].startswith('{"run":'), lines[0])

    def test_resume_with_another_seed_says_so(self):
        d = self.copy_checkpoints("reseeded")
        status, out = train(SAVE_MESH + ["--checkpoint-dir", d, "--resume", "--seed", "99",
                                         "--log", "reseeded.jsonl"])
        self.assertEqual(status, 0, out)
        self.assertIn("settings differ from the checkpoint's (seed ", out)
        self.assertIn(" -> 99)", out)
        self.assertEqual(sorted(losses("reseeded.jsonl")), list(range(10, STEPS)))

    # 2. Resume on another mesh.

    def resume_other_mesh(self, name, mesh):
        d = self.copy_checkpoints(name)
        status, out = train(mesh + ["--checkpoint-dir", d, "--resume", "--log", name + ".jsonl"])
        self.assertEqual(status, 0, out)
        self.expect_resumed_from(out, d, 10)
        got = losses(name + ".jsonl")
        self.assertEqual(sorted(got), list(range(10, STEPS)))
        for step, loss in got.items():
            want = self.reference[step]
            self.assertLessEqual(abs(loss - want), 1e-5 * abs(want),
                                 "%s step %d: %r, uninterrupted %r" % (name, step, loss, want))

    def test_resume_on_dp4(self):
        self.resume_other_mesh("dp4", ["--dp", "4", "--zero", "1"])

    def test_resume_on_tp4(self):
        self.resume_other_mesh("tp4", ["--tp", "4"])

    def test_resume_on_sp2_dp2(self):
        self.resume_other_mesh("sp2_dp2", ["--sp", "2", "--dp", "2", "--zero", "2"])

    def test_resume_on_pp2_dp2(self):
        self.resume_other_mesh("pp2_dp2", ["--pp", "2", "--dp", "2", "--zero", "1"])

    # 3. Damaged checkpoints.

    def test_truncated_shard(self):
        d = self.copy_checkpoints("truncated")
        shard = os.path.join(TMP, d, "step-10", "shard-1-of-4.bin")
        os.truncate(shard, os.path.getsize(shard) // 2)
        self.expect_error(SAVE_MESH, ["%s/step-10/shard-1-of-4.bin" % d, "truncated shard"], d)

    def test_corrupted_shard(self):
        d = self.copy_checkpoints("corrupted")
        shard = os.path.join(TMP, d, "step-10", "shard-2-of-4.bin")
        with open(shard, "r+b") as f:
            f.seek(os.path.getsize(shard) // 2)
            byte = f.read(1)[0]
            f.seek(-1, os.SEEK_CUR)
            f.write(bytes([byte ^ 0x10]))
        self.expect_error(SAVE_MESH, ["%s/step-10/shard-2-of-4.bin" % d, "checksum mismatch"], d)

    def test_deleted_shard(self):
        d = self.copy_checkpoints("deleted_shard")
        os.remove(os.path.join(TMP, d, "step-10", "shard-3-of-4.bin"))
        self.expect_error(SAVE_MESH, ["%s/step-10/shard-3-of-4.bin" % d, "missing shard"], d)

    def test_deleted_index_resumes_from_the_older_step(self):
        d = self.copy_checkpoints("deleted_index")
        os.remove(os.path.join(TMP, d, "step-10", "index.json"))
        status, out = train(SAVE_MESH + ["--checkpoint-dir", d, "--resume", "--log", "e.jsonl"])
        self.assertEqual(status, 0, out)
        self.expect_resumed_from(out, d, 5)
        got = losses("e.jsonl")
        self.assertEqual(sorted(got), list(range(5, STEPS)))
        for step, loss in got.items():
            self.assertEqual(loss, self.reference[step], "step %d" % step)

    def test_deleted_index_without_an_older_step(self):
        d = self.copy_checkpoints("deleted_index_only")
        shutil.rmtree(os.path.join(TMP, d, "step-5"))
        os.remove(os.path.join(TMP, d, "step-10", "index.json"))
        self.expect_error(SAVE_MESH, ["no complete checkpoint in %s" % d], d)

    def test_resume_on_an_empty_directory(self):
        os.makedirs(os.path.join(TMP, "empty"), exist_ok=True)
        self.expect_error(SAVE_MESH, ["no complete checkpoint in empty"], "empty")

    def test_another_models_checkpoint(self):
        d = self.copy_checkpoints("other_model")
        index = "%s/step-10/index.json" % d
        model = dict(zip(MODEL[::2], MODEL[1::2]))
        for flag, value, field in [("--layers", "3", "layers 2; this run's has 3"),
                                   ("--dim", "64", "dim 32; this run's has 64")]:
            other = dict(model, **{flag: value})
            args = [x for kv in other.items() for x in kv]
            status, out = run(["--data", CORPUS, "--steps", str(STEPS)] + args + SAVE_MESH +
                              ["--checkpoint-dir", d, "--resume"])
            self.assertNotEqual(status, 0, out)
            self.assertIn(index, out)
            self.assertIn(field, out)
            self.assertEqual(progress_lines(out), [], out)

    # 4. Plots and flags.

    def test_plots(self):
        status, out = train(SAVE_MESH + ["--log", "p.jsonl", "--plot", "p.png"])
        self.assertEqual(status, 0, out)
        self.assertIn("gyre-train: drew p.png", out)
        for name in ["a.svg", "p.png"]:
            with open(os.path.join(TMP, name), "rb") as f:
                data = f.read()
            if name.endswith(".svg"):
                self.assertIn(b"<svg", data[:400])
                self.assertIn(b"</svg>", data[-100:])
            else:
                self.assertEqual(data[:8], b"\x89PNG\r\n\x1a\n")
                self.assertIn(b"IEND", data[-16:])
        # Two earlier runs in one figure, without training.
        p = subprocess.run([GYRE_TRAIN, "--plot", "two.svg", "a.jsonl", "b.jsonl"], cwd=TMP,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        out = p.stdout.decode()
        self.assertEqual(p.returncode, 0, out)
        self.assertIn("drew 2 run(s) into two.svg", out)
        with open(os.path.join(TMP, "two.svg")) as f:
            svg = f.read()
        self.assertIn("</svg>", svg[-100:])
        # Both runs are in the legend under their logs' names.
        self.assertEqual(svg.count("dp 2 x tp 2 x pp 1, zero 1"), 2, svg[:3000])

    def test_mixture_of_experts(self):
        """--experts: every block's MLP a mixture of 4 experts (top 2) over dp 2 x pp 2,
        the progress line saying what the capacity dropped; it learns, and its checkpoint
        is refused by a dense run naming the difference."""
        status, out = train(["--dp", "2", "--pp", "2", "--zero", "1", "--experts", "4",
                             "--capacity-factor", "1", "--log", "moe.jsonl",
                             "--checkpoint-dir", "moe"])
        self.assertEqual(status, 0, out)
        lines = [l for l in out.splitlines() if re.search(r"step \d+/%d " % STEPS, l)]
        self.assertTrue(lines and all(re.search(r"dropped \d+\.\d%", l) for l in lines), out)
        got = losses("moe.jsonl")
        self.assertEqual(sorted(got), list(range(STEPS)))
        self.assertLess(got[STEPS - 1], got[0] - 0.5)
        status, out = train(["--dp", "4", "--checkpoint-dir", "moe", "--resume"])
        self.assertNotEqual(status, 0, out)
        self.assertIn("index.json", out)

    def test_expert_parallelism(self):
        """--ep 2: the 4 experts spread over 2 of the 4 data-parallel ranks, tokens
        dispatched to them; it learns, and a run with every expert on every rank resumes
        from its checkpoint."""
        moe = ["--dp", "4", "--experts", "4", "--capacity-factor", "1"]
        status, out = train(moe + ["--ep", "2", "--log", "ep.jsonl", "--checkpoint-dir", "ep"])
        self.assertEqual(status, 0, out)
        self.assertIn("ep 2", out)
        got = losses("ep.jsonl")
        self.assertEqual(sorted(got), list(range(STEPS)))
        self.assertLess(got[STEPS - 1], got[0] - 0.5)
        # Each rank's capacity and drops are its own batch's, wherever its
        # experts live: the same run as with every expert on every rank.
        status, out = train(moe + ["--log", "ep1.jsonl"])
        self.assertEqual(status, 0, out)
        for step, loss in losses("ep1.jsonl").items():
            self.assertLess(abs(got[step] - loss), 1e-4 * abs(loss), step)
        status, out = train(moe + ["--steps", str(STEPS + 2), "--checkpoint-dir", "ep",
                                   "--resume"])
        self.assertEqual(status, 0, out)

    def test_flexsp(self):
        """--flexsp: variable-length batches planned each step (the progress line names
        the plan), learning; killed after step 10 and resumed, the losses are the
        uninterrupted run's bit for bit."""
        args = ["--flexsp", "--flexsp-median", "12"]
        status, out = train(args + ["--log", "flex.jsonl"])
        self.assertEqual(status, 0, out)
        lines = [l for l in out.splitlines() if re.search(r"step \d+/%d " % STEPS, l)]
        self.assertTrue(lines and all(re.search(r"plan greedy: \d+x\d", l) for l in lines), out)
        ref = losses("flex.jsonl")
        self.assertEqual(sorted(ref), list(range(STEPS)))
        self.assertLess(ref[STEPS - 1], ref[0] - 0.5)
        status, out = train(args + ["--checkpoint-dir", "flex", "--checkpoint-every", "5"],
                            env={"GYRE_TRAIN_KILL_AFTER_STEP": "10"})
        self.assertEqual(status, 137, out)
        status, out = train(args + ["--checkpoint-dir", "flex", "--resume", "--log", "flex2.jsonl"])
        self.assertEqual(status, 0, out)
        self.expect_resumed_from(out, "flex", 10)
        got = losses("flex2.jsonl")
        self.assertEqual(sorted(got), list(range(10, STEPS)))
        for step, loss in got.items():
            self.assertEqual(loss, ref[step], "step %d" % step)

    def test_bad_flags_exit_2_naming_the_flag(self):
        cases = [
            (["--steps", "ten"], "--steps"),
            (["--bogus"], "--bogus"),
            (["--zero", "4"], "--zero"),
            (["--plot", "run.pdf"], "--plot"),
            (["--lr"], "--lr needs a value"),
            (["--resume"], "--resume needs --checkpoint-dir"),
            (["--sp", "3"], "--sp 3 does not divide --seq 64"),
            (["--sp", "2", "--codec", "int8"], "--sp needs exact data parallelism"),
            (["--experts", "2", "--top-k", "3"], "--top-k 3 is more than --experts 2"),
            (["--experts", "2", "--tp", "2"], "--experts with --tp"),
            (["--experts", "4", "--ep", "2", "--zero", "2"], "--ep with --zero 2"),
            (["--flexsp", "--tp", "2"], "--flexsp with --tp"),
            (["--flexsp", "--sp", "2"], "drop --sp"),
        ]
        for extra, flag in cases:
            base = ["--data", CORPUS] if "--data" not in extra else []
            p = subprocess.run([GYRE_TRAIN] + base + extra, cwd=TMP, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT)
            out = p.stdout.decode()
            self.assertEqual(p.returncode, 2, "%s: %s" % (extra, out))
            self.assertIn(flag, out)
        # Under gyrerun: the same status, and a mesh that does not fit the job.
        for extra, flag in [(["--bogus"], "--bogus"), (["--tp", "3"], "--tp 3")]:
            status, out = train(extra)
            self.assertEqual(status, 2, out)
            self.assertIn(flag, out)
            self.assertEqual(progress_lines(out), [], out)
        p = subprocess.run([GYRE_TRAIN, "--plot", "x.svg", "missing.jsonl"], cwd=TMP,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("missing.jsonl", p.stdout.decode())


def main():
    global GYRERUN, GYRE_TRAIN, TMP, CORPUS
    if len(sys.argv) != 3:
        print("usage: train_cli_test.py GYRERUN GYRE_TRAIN", file=sys.stderr)
        return 2
    GYRERUN, GYRE_TRAIN = (os.path.abspath(p) for p in sys.argv[1:])
    TMP = tempfile.mkdtemp(prefix="gyre-train-cli-")
    # The token file goes to TMPDIR: keep it with the rest.
    os.environ["TMPDIR"] = TMP
    CORPUS = os.path.join(TMP, "corpus.txt")
    make_corpus(CORPUS)
    try:
        result = unittest.main(argv=[sys.argv[0], "-v"], exit=False).result
    finally:
        shutil.rmtree(TMP, ignore_errors=True)
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
