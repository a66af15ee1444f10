"""The `dhelix` console command.

    dhelix run [--auto | --plan FILE | --profile DIR] [--cache DIR] [--print-env] -- COMMAND...
    dhelix <plan|show|validate|config|profile-pairs|help|--version> ...

`run` is the only subcommand written in Python: it puts the installed shim first in
LD_PRELOAD, sets the DHELIX_* variables its options name, and replaces itself with COMMAND
(exec), so COMMAND's exit status and signals are the job's own, as if it had been started
directly; launchers such as torchrun and mpirun pass the environment on to their ranks.
Every other subcommand is the C `dhelix` installed beside the shim (the one implementation
of plan, show, validate and config), run by exec with the same arguments.

Exit status of `run` itself, before COMMAND starts: 2 for a usage error or bad input (a
missing plan file, no command), 126 when COMMAND cannot be executed, 127 when it is not
found (a shell's codes).
"""
import os
import sys

import dhelix

RUN_USAGE = """usage: dhelix run [--auto | --plan FILE | --profile DIR] [--cache DIR] [--print-env] -- COMMAND...

Runs COMMAND (torchrun ..., mpirun ..., python train.py ...) with the DHelix shim preloaded.

  --auto          DHELIX_MODE=auto: profile the first iterations, plan in the job, switch
                  to Strand Interleaving when every rank agrees (the usual choice)
  --plan FILE     DHELIX_MODE=plan DHELIX_PLAN=FILE: run a plan made by `dhelix plan`
  --profile DIR   DHELIX_MODE=profile DHELIX_PROFILE=DIR/prof.%r.json: record one profile per
                  rank for `dhelix plan DIR/prof.*.json -o plan.json`
  --cache DIR     DHELIX_PLAN_CACHE=DIR: auto mode keeps its plans there; a later run of the
                  same job switches at its first iteration
  --print-env     print the variables as shell assignments and exit without running
  (no mode option: the mode is what DHELIX_MODE / DHELIX_PLAN in the environment say,
   passthrough when neither is set)

LD_PRELOAD gets the installed shim first (%s); every other DHELIX_* variable
passes through unchanged (`dhelix config` lists them). COMMAND's exit status is returned.
"""


def _die(msg, code=2):
    sys.stderr.write("dhelix run: %s\n" % msg)
    return code


def _parse_run(args):
    """Splits `run`'s arguments into (options dict, command list); raises ValueError."""
    opts = {"mode": None, "value": None, "cache": None, "print_env": False, "help": False}
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--":
            return opts, args[i + 1:]
        if not a.startswith("-"):
            return opts, args[i:]
        name, eq, inline = a.partition("=")
        if name in ("-h", "--help"):
            opts["help"] = True
        elif name == "--print-env":
            opts["print_env"] = True
        elif name in ("--auto", "--plan", "--profile", "--cache"):
            value = None
            if name != "--auto":
                if eq:
                    value = inline
                elif i + 1 < len(args):
                    i += 1
                    value = args[i]
                if not value:
                    raise ValueError("%s needs a value" % name)
            elif eq:
                raise ValueError("--auto takes no value")
            if name == "--cache":
                opts["cache"] = value
            else:
                if opts["mode"] and opts["mode"] != name:
                    raise ValueError("%s and %s exclude each other" % (opts["mode"], name))
                opts["mode"], opts["value"] = name, value
        else:
            raise ValueError("unknown option %s (dhelix run --help)" % a)
        i += 1
    return opts, []


def run_env(opts, environ):
    """The environment COMMAND gets: environ with the shim first in LD_PRELOAD and the
    DHELIX_* variables of opts (paths made absolute: a launcher may change directory).
    Returns (env, notes); raises ValueError for bad input."""
    env = dict(environ)
    shim = dhelix.shim_path()
    if not os.path.isfile(shim):
        raise ValueError("the shim is not installed at %s (reinstall the package)" % shim)
    notes = []
    # A shim already in LD_PRELOAD (another copy, or ours from an outer `dhelix run`) would
    # interpose twice: it is replaced by this one.
    rest = [p for p in environ.get("LD_PRELOAD", "").replace(" ", ":").split(":") if p]
    kept = [p for p in rest if os.path.basename(p) != "libdhelix_shim.so"]
    if len(kept) != len(rest):
        notes.append("replaced %s in LD_PRELOAD by %s" % (
            ", ".join(p for p in rest if p not in kept), shim))
    env["LD_PRELOAD"] = ":".join([shim] + kept)
    mode, value = opts["mode"], opts["value"]
    if mode == "--auto":
        env["DHELIX_MODE"] = "auto"
        env.pop("DHELIX_PLAN", None)
    elif mode == "--plan":
        if not os.path.isfile(value):
            raise ValueError("--plan %s: no such file (make one with `dhelix plan`)" % value)
        env["DHELIX_MODE"] = "plan"
        env["DHELIX_PLAN"] = os.path.abspath(value)
    elif mode == "--profile":
        try:
            os.makedirs(value, exist_ok=True)
        except OSError as e:
            raise ValueError("--profile %s: cannot make the directory (%s)" % (value, e.strerror))
        env["DHELIX_MODE"] = "profile"
        env["DHELIX_PROFILE"] = os.path.join(os.path.abspath(value), "prof.%r.json")
        env.pop("DHELIX_PLAN", None)
        notes.append("profiles go to %s; then: dhelix plan %s -o plan.json" % (
            env["DHELIX_PROFILE"], os.path.join(value, "prof.*.json")))
    if opts["cache"]:
        try:
            os.makedirs(opts["cache"], exist_ok=True)
        except OSError as e:
            raise ValueError("--cache %s: cannot make the directory (%s)" % (opts["cache"], e.strerror))
        env["DHELIX_PLAN_CACHE"] = os.path.abspath(opts["cache"])
        if env.get("DHELIX_MODE") != "auto":
            notes.append("--cache is read by auto mode only (DHELIX_MODE is %s)" %
                         env.get("DHELIX_MODE", "unset"))
    return env, notes


def _run(args):
    try:
        opts, cmd = _parse_run(args)
    except ValueError as e:
        return _die(str(e))
    if opts["help"]:
        sys.stdout.write(RUN_USAGE % dhelix.shim_path())
        return 0
    try:
        env, notes = run_env(opts, os.environ)
    except ValueError as e:
        return _die(str(e))
    if opts["print_env"]:
        for k in sorted(env):
            if k == "LD_PRELOAD" or (k.startswith("DHELIX_") and env[k] != os.environ.get(k)):
                sys.stdout.write("%s=%s\n" % (k, _quote(env[k])))
        return 0
    if not cmd:
        return _die("no command to run (dhelix run [options] -- COMMAND...)")
    for n in notes:
        sys.stderr.write("dhelix run: %s\n" % n)
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execvpe(cmd[0], cmd, env)
    except FileNotFoundError:
        return _die("%s: command not found" % cmd[0], 127)
    except OSError as e:
        return _die("%s: cannot execute (%s)" % (cmd[0], e.strerror), 126)
    return 126  # not reached: exec does not return


def _quote(s):
    safe = all(c.isalnum() or c in "/._-:%=+,@" for c in s)
    return s if safe and s else "'" + s.replace("'", "'\\''") + "'"


def main(argv=None):
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] == "run":
        return _run(args[1:])
    cli = dhelix.cli_path()
    if not args or args[0] in ("help", "-h", "--help"):
        # The C usage lists the C commands; run is this wrapper's.
        sys.stdout.write("dhelix run [--auto | --plan FILE | --profile DIR] [--cache DIR] -- "
                         "COMMAND...\n    run a job under the shim (dhelix run --help)\n")
        sys.stdout.flush()
    try:
        os.execv(cli, [cli] + args)
    except OSError as e:
        sys.stderr.write("dhelix: cannot run %s (%s); reinstall the package\n" % (cli, e.strerror))
        return 126
    return 126


if __name__ == "__main__":
    sys.exit(main())
