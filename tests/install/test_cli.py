#!/usr/bin/env python3
"""install.cli: `dhelix run`'s options and the environment it gives the command
(python/dhelix/cli.py), from the source tree, without building the package: the shim's path
is pointed at a file of the test's own. What exec does with the command (exit status,
signals) is install.wheel's, on the installed package.

    test_cli.py SOURCE_DIR SCRATCH_DIR
"""
import os
import shutil
import sys

src, work = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.join(src, "python"))
import dhelix  # noqa: E402
from dhelix import cli  # noqa: E402

shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
shim = os.path.join(work, "libdhelix_shim.so")
open(shim, "w").close()
dhelix.shim_path = lambda: shim
failures = []


def check(what, got, want):
    if got != want:
        failures.append("%s: got %r, want %r" % (what, got, want))


def parse(args):
    try:
        return cli._parse_run(args)
    except ValueError as e:
        return "error: %s" % e


def env_of(args, environ):
    opts, _ = cli._parse_run(args)
    try:
        env, notes = cli.run_env(opts, environ)
    except ValueError as e:
        return "error: %s" % e, []
    return {k: v for k, v in env.items() if k == "LD_PRELOAD" or k.startswith("DHELIX_")}, notes


# Options and the command: after "--", or from the first word that is not an option.
opts, cmd = parse(["--auto", "--cache", "c", "--", "torchrun", "--nproc-per-node", "8", "x.py"])
check("--auto mode", opts["mode"], "--auto")
check("--cache value", opts["cache"], "c")
check("command after --", cmd, ["torchrun", "--nproc-per-node", "8", "x.py"])
check("command without --", parse(["--plan=p.json", "python", "-u", "t.py"])[1], ["python", "-u", "t.py"])
check("--plan=value", parse(["--plan=p.json", "--", "true"])[0]["value"], "p.json")
check("modes exclude each other", parse(["--auto", "--plan", "p", "--", "true"]),
      "error: --auto and --plan exclude each other")
check("--plan needs a value", parse(["--plan"]), "error: --plan needs a value")
check("unknown option", parse(["--autp", "--", "true"]), "error: unknown option --autp (dhelix run --help)")

# The environment.
env, notes = env_of(["--auto", "--cache", os.path.join(work, "cache"), "--", "x"],
                    {"LD_PRELOAD": "/other/libfoo.so", "DHELIX_PLAN": "old.json", "DHELIX_LOG": "info"})
check("--auto env", env, {"LD_PRELOAD": shim + ":/other/libfoo.so", "DHELIX_MODE": "auto",
                          "DHELIX_PLAN_CACHE": os.path.join(work, "cache"), "DHELIX_LOG": "info"})
check("--cache made the directory", os.path.isdir(os.path.join(work, "cache")), True)
env, notes = env_of(["--", "x"], {"LD_PRELOAD": "/old/build/lib/libdhelix_shim.so:/other/libfoo.so"})
check("another shim in LD_PRELOAD is replaced", env["LD_PRELOAD"], shim + ":/other/libfoo.so")
check("and said so", len(notes), 1)
env, notes = env_of(["--", "x"], {"DHELIX_MODE": "stress"})
check("no mode option keeps the caller's", env, {"LD_PRELOAD": shim, "DHELIX_MODE": "stress"})
check("a missing plan", env_of(["--plan", os.path.join(work, "none.json"), "--", "x"], {})[0],
      "error: --plan %s: no such file (make one with `dhelix plan`)" % os.path.join(work, "none.json"))
plan = os.path.join(work, "plan.json")
open(plan, "w").close()
cwd = os.getcwd()
os.chdir(work)
env, notes = env_of(["--plan", "plan.json", "--", "x"], {"DHELIX_MODE": "auto"})
os.chdir(cwd)
check("--plan env (absolute, mode plan)", env, {"LD_PRELOAD": shim, "DHELIX_MODE": "plan", "DHELIX_PLAN": plan})
env, notes = env_of(["--profile", os.path.join(work, "prof"), "--", "x"], {"DHELIX_PLAN": "p.json"})
check("--profile env", env, {"LD_PRELOAD": shim, "DHELIX_MODE": "profile",
                             "DHELIX_PROFILE": os.path.join(work, "prof", "prof.%r.json")})
check("--profile made the directory", os.path.isdir(os.path.join(work, "prof")), True)
env, notes = env_of(["--cache", os.path.join(work, "c2"), "--", "x"], {})
check("--cache without auto mode says so", any("auto mode only" in n for n in notes), True)
# Exit statuses that `run` gives itself, before any command runs.
check("no command", cli.main(["run", "--auto"]), 2)
check("usage error", cli.main(["run", "--bogus", "--", "true"]), 2)
os.unlink(shim)
check("no shim installed", env_of(["--", "x"], {})[0],
      "error: the shim is not installed at %s (reinstall the package)" % shim)


if failures:
    print("FAIL:\n  " + "\n  ".join(failures))
    sys.exit(1)
print("PASS")
