"""scripts/bench.d/pictures.py: SVG pictures (plain SVG 1.1, generic fonts, no scripts) and
their PNGs (rsvg-convert), from vgpu traces and the bench's results.

  timeline(base_trace, si_trace, out_stem, title, subtitle)
      one steady micro-batch cycle of each run, on one time axis: the baseline's compute
      and communication lanes, and the same two lanes for each strand of the SI run
  speedup_bars(results, out_stem)
      our SI speedup beside the paper's, per configuration

Strands in a trace: the vgpu writes one lane per stream; the shim runs strand a on the
framework's own streams and strand b on streams it creates, so a stream of the SI run that
the baseline run never used is strand b's.
"""
import json
import os
import shutil
import subprocess
import sys
from xml.sax.saxutils import escape

COLORS = {"gemm": "#2f5d8a", "kernel": "#7aa6d6", "comm": "#e15759", "copy": "#f28e2b"}
LEGEND = (("gemm", "GEMM"), ("kernel", "other kernel"), ("comm", "collective / p2p"),
          ("copy", "copy, memset"))
FONT = 'font-family="sans-serif"'


def _events(path):
    d = json.load(open(path))
    # Device work only: NVTX ranges (cat "nvtx", on host lanes) are the shim's own marks.
    return [e for e in d["traceEvents"] if e.get("ph") == "X" and e.get("cat") != "nvtx"]


def _kind(e):
    if e.get("cat") == "comm":
        return "comm"
    n = e.get("name", "")
    if e.get("cat") == "copy" or n.startswith(("memset", "memcpy")):
        return "copy"
    return "gemm" if n.startswith("gemm") else "kernel"


def _cycle(events, anchor, iters):
    """[t0, t1) (us) of one steady micro-batch cycle: between two consecutive starts of
    ANCHOR (the first forward op of a micro-batch), in the middle of the second-to-last
    iteration."""
    starts = sorted(e["ts"] for e in events if e["name"] == anchor)
    if len(starts) < 2 * iters or len(starts) % iters:
        raise ValueError("trace: %d '%s' ops for %d iterations" % (len(starts), anchor, iters))
    per = len(starts) // iters
    k = (iters - 2) * per + per // 2
    if k + 1 >= len(starts):
        k = len(starts) - 2
    return starts[k], starts[k + 1]


def _rects(events, t0, t1, lane_of, x0, scale, lane_y, lane_h):
    out = []
    for e in events:
        a, b = max(e["ts"], t0), min(e["ts"] + e["dur"], t1)
        if b <= a:
            continue
        lane = lane_of(e)
        if lane is None:
            continue
        x, w = x0 + (a - t0) * scale, max((b - a) * scale, 0.6)
        tip = "%s (%.3f ms)" % (e["name"], e["dur"] / 1000.0)
        out.append('<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s" stroke="white" '
                   'stroke-width="0.3"><title>%s</title></rect>'
                   % (x, lane_y[lane], w, lane_h, COLORS[_kind(e)], escape(tip)))
    return out


def timeline(base_trace, si_trace, out_stem, title, subtitle, anchor="embedding_fwd", iters=4):
    """Writes OUT_STEM.svg and OUT_STEM.png; returns their paths and the two cycle times."""
    be, se = _events(base_trace), _events(si_trace)
    b0, b1 = _cycle(be, anchor, iters)
    s0, s1 = _cycle(se, anchor, iters)
    base_streams = {e["tid"] for e in be}
    width, left, right = 1200.0, 170.0, 30.0
    span = max(b1 - b0, s1 - s0)
    scale = (width - left - right) / span
    lane_h, top = 22.0, 78.0
    # Baseline: 2 lanes; a gap; SI: 4 lanes.
    names = ["compute", "communication", "strand a compute", "strand a communication",
             "strand b compute", "strand b communication"]
    ys = [top, top + 26, top + 92, top + 118, top + 152, top + 178]
    axis_y = ys[-1] + lane_h + 12
    height = axis_y + 74
    s = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d">'
         % (width, height, width, height),
         '<rect width="100%" height="100%" fill="white"/>',
         '<text x="%d" y="24" %s font-size="16" font-weight="bold">%s</text>' % (left - 150, FONT, escape(title)),
         '<text x="%d" y="44" %s font-size="12" fill="#444">%s</text>' % (left - 150, FONT, escape(subtitle))]
    s.append('<text x="%d" y="%d" %s font-size="13" font-weight="bold">baseline: %.2f ms</text>'
             % (left - 150, top - 8, FONT, (b1 - b0) / 1000))
    s.append('<text x="%d" y="%d" %s font-size="13" font-weight="bold">SI (two strands): %.2f ms '
             '(%+.1f%%)</text>' % (left - 150, ys[2] - 8, FONT, (s1 - s0) / 1000,
                                    100.0 * ((s1 - s0) / (b1 - b0) - 1)))
    for i, n in enumerate(names):
        s.append('<rect x="%d" y="%.1f" width="%.1f" height="%.1f" fill="#f3f3f3"/>'
                 % (left, ys[i], (b1 - b0 if i < 2 else s1 - s0) * scale, lane_h))
        s.append('<text x="%d" y="%.1f" %s font-size="12" text-anchor="end">%s</text>'
                 % (left - 8, ys[i] + 15, FONT, n))
    s += _rects(be, b0, b1, lambda e: 1 if e.get("cat") == "comm" else 0, left, scale, ys, lane_h)

    def si_lane(e):
        strand = 0 if e["tid"] in base_streams else 1
        return 2 + 2 * strand + (1 if e.get("cat") == "comm" else 0)

    s += _rects(se, s0, s1, si_lane, left, scale, ys, lane_h)
    # Time axis in ms, from each cycle's start.
    s.append('<line x1="%d" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>'
             % (left, axis_y, left + span * scale, axis_y))
    step = _nice_step(span / 1000.0 / 8)
    t = 0.0
    while t <= span / 1000.0 + 1e-9:
        x = left + t * 1000 * scale
        s.append('<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>' % (x, axis_y, x, axis_y + 5))
        s.append('<text x="%.1f" y="%.1f" %s font-size="11" text-anchor="middle">%g</text>'
                 % (x, axis_y + 18, FONT, round(t, 6)))
        t += step
    s.append('<text x="%.1f" y="%.1f" %s font-size="12" text-anchor="middle">ms from the start of the '
             'cycle (virtual time)</text>' % (left + span * scale / 2, axis_y + 34, FONT))
    s += _legend(left, axis_y + 52)
    s.append("</svg>")
    return _write(out_stem, s, {"baseline_cycle_ms": (b1 - b0) / 1000, "si_cycle_ms": (s1 - s0) / 1000})


def _mem_samples(path, dev=0):
    """[(ts us, MiB)] of the vgpu trace's "device memory (dev D)" counter, in time order."""
    d = json.load(open(path))
    name = "device memory (dev %d)" % dev
    return sorted((e["ts"], e["args"]["MiB"]) for e in d["traceEvents"]
                  if e.get("ph") == "C" and e.get("name") == name)


def _iteration(events, anchor, iters):
    """[t0, t1) (us) of the second-to-last iteration: from its first ANCHOR op (the first
    forward op of a micro-batch) to the next iteration's."""
    starts = sorted(e["ts"] for e in events if e["name"] == anchor)
    if len(starts) < 2 * iters or len(starts) % iters:
        raise ValueError("trace: %d '%s' ops for %d iterations" % (len(starts), anchor, iters))
    per = len(starts) // iters
    return starts[(iters - 2) * per], starts[(iters - 1) * per]


def _steps(samples, t0, t1):
    """The counter over [t0, t1): its value at t0, then every change inside."""
    before = [v for t, v in samples if t <= t0]
    out = [(t0, before[-1] if before else 0.0)]
    out += [(t, v) for t, v in samples if t0 < t < t1]
    return out


def memory(base_trace, si_trace, out_stem, title, subtitle, anchor="embedding_fwd", iters=4):
    """Device memory in use over one iteration (the second-to-last), baseline against SI,
    from the vgpu traces' memory counters (rank 0, device 0). Writes OUT_STEM.svg and .png;
    returns their paths and both peaks over that iteration (MiB)."""
    runs = []
    for path in (base_trace, si_trace):
        t0, t1 = _iteration(_events(path), anchor, iters)
        st = _steps(_mem_samples(path), t0, t1)
        runs.append((t0, t1, st, max(v for _, v in st)))
    (b0, b1, bs, bpeak), (s0, s1, ss, speak) = runs
    width, left, right, top, plot_h = 1200.0, 90.0, 30.0, 70.0, 300.0
    span = max(b1 - b0, s1 - s0)
    lo = min(v for _, v in bs + ss)
    hi = max(bpeak, speak)
    lo = max(0.0, lo - 0.05 * (hi - lo))
    xs = (width - left - right) / span
    ys = plot_h / ((hi - lo) or 1.0)
    y_of = lambda v: top + plot_h - (v - lo) * ys  # noqa: E731
    colors = {"base": "#888888", "si": "#d62728"}
    height = top + plot_h + 90
    s = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d">'
         % (width, height, width, height),
         '<rect width="100%" height="100%" fill="white"/>',
         '<text x="20" y="24" %s font-size="16" font-weight="bold">%s</text>' % (FONT, escape(title)),
         '<text x="20" y="44" %s font-size="12" fill="#444">%s</text>' % (FONT, escape(subtitle))]
    for key, (t0, t1, st, _) in zip(("base", "si"), runs):
        if len(st) > 4000:
            # one point per pixel column: its largest value (a full model's iteration makes
            # hundreds of thousands of allocations)
            cols = {}
            for t, v in st:
                c = int((t - t0) * xs)
                cols[c] = max(cols.get(c, v), v)
            st = [(t0 + c / xs, v) for c, v in sorted(cols.items())]
        pts, prev = [], None
        for t, v in st + [(t1, st[-1][1])]:
            x = left + (t - t0) * xs
            if prev is not None:
                pts.append("%.1f,%.1f" % (x, y_of(prev)))
            pts.append("%.1f,%.1f" % (x, y_of(v)))
            prev = v
        s.append('<polyline fill="none" stroke="%s" stroke-width="1.4" points="%s"/>'
                 % (colors[key], " ".join(pts)))
    for key, peak in (("base", bpeak), ("si", speak)):
        s.append('<line x1="%d" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-dasharray="4,3"/>'
                 % (left, y_of(peak), left + span * xs, y_of(peak), colors[key]))
    step = _nice_step((hi - lo) / 6)
    v = (lo // step + 1) * step
    while v <= hi + 1e-9:
        s.append('<text x="%d" y="%.1f" %s font-size="11" text-anchor="end">%g</text>'
                 % (left - 6, y_of(v) + 4, FONT, round(v, 6)))
        s.append('<line x1="%d" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#eeeeee"/>'
                 % (left, y_of(v), left + span * xs, y_of(v)))
        v += step
    s.append('<text x="20" y="%.1f" %s font-size="12" transform="rotate(-90 20 %.1f)" '
             'text-anchor="middle">MiB in use</text>' % (top + plot_h / 2, FONT, top + plot_h / 2))
    axis_y = top + plot_h + 8
    tstep = _nice_step(span / 1000.0 / 8)
    t = 0.0
    while t <= span / 1000.0 + 1e-9:
        x = left + t * 1000 * xs
        s.append('<text x="%.1f" y="%.1f" %s font-size="11" text-anchor="middle">%g</text>'
                 % (x, axis_y + 12, FONT, round(t, 6)))
        t += tstep
    s.append('<text x="%.1f" y="%.1f" %s font-size="12" text-anchor="middle">ms from the start of the '
             'iteration (virtual time, the host\'s clock at each allocation and free)</text>'
             % (left + span * xs / 2, axis_y + 30, FONT))
    y = axis_y + 56
    s.append('<rect x="%d" y="%.1f" width="14" height="3" fill="%s"/>' % (left, y - 5, colors["base"]))
    s.append('<text x="%d" y="%.1f" %s font-size="12">baseline (peak %.1f MiB, iteration %.2f ms)</text>'
             % (left + 19, y, FONT, bpeak, (b1 - b0) / 1000))
    s.append('<rect x="%d" y="%.1f" width="14" height="3" fill="%s"/>' % (left + 420, y - 5, colors["si"]))
    s.append('<text x="%d" y="%.1f" %s font-size="12">SI (peak %.1f MiB, %+.2f%%; iteration %.2f ms)</text>'
             % (left + 439, y, FONT, speak, 100.0 * (speak / bpeak - 1) if bpeak else 0, (s1 - s0) / 1000))
    s.append("</svg>")
    return _write(out_stem, s, {"baseline_peak_mib": bpeak, "si_peak_mib": speak})


def _nice_step(x):
    """The smallest of 1, 2, 5 x 10^k that is >= x."""
    return min(m * 10.0 ** e for e in range(-3, 7) for m in (1, 2, 5) if m * 10.0 ** e >= x)


def _legend(x, y, items=LEGEND, colors=COLORS):
    out = []
    for key, label in items:
        out.append('<rect x="%.1f" y="%.1f" width="14" height="12" fill="%s"/>' % (x, y - 10, colors[key]))
        out.append('<text x="%.1f" y="%.1f" %s font-size="12">%s</text>' % (x + 19, y, FONT, escape(label)))
        x += 44 + 7.4 * len(label)
    return out


def _write(out_stem, parts, extra=None):
    svg = out_stem + ".svg"
    with open(svg, "w") as f:
        f.write("\n".join(parts) + "\n")
    res = {"svg": svg}
    if shutil.which("rsvg-convert"):
        png = out_stem + ".png"
        p = subprocess.run(["rsvg-convert", "-f", "png", "-o", png, svg], capture_output=True, text=True)
        if p.returncode == 0:
            res["png"] = png
        else:
            res["png_error"] = p.stderr.strip()[:200]
    else:
        res["png_error"] = "rsvg-convert not installed"
    res.update(extra or {})
    return res


def paper_speedup(r):
    """The paper's speedup, and for the Hopper report (MFU points) the range that those points
    give on our baseline's MFU: (mfu + gain) / mfu."""
    p = r.get("paper") or {}
    if "speedup" in p:
        return p["speedup"], None
    if "mfu_gain_points" in p and r.get("baseline_mfu"):
        m = r["baseline_mfu"] * 100
        lo, hi = ((m + g) / m for g in p["mfu_gain_points"])
        return (lo + hi) / 2, (lo, hi)
    return None, None


def speedup_bars(results, out_stem):
    width, left, top, plot_h = 1200.0, 70.0, 60.0, 300.0
    n = max(len(results), 1)
    group = (width - left - 30) / n
    vals = [v for r in results for v in (r.get("speedup"), paper_speedup(r)[0], r.get("ideal_speedup")) if v]
    ymax = max([1.4] + [v * 1.08 for v in vals])
    ymin = min([0.9] + [v * 0.98 for v in vals])
    y = lambda v: top + plot_h * (1 - (v - ymin) / (ymax - ymin))  # noqa: E731
    colors = {"ours": "#4e79a7", "paper": "#bab0ac", "ideal": "#e15759"}
    s = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d">'
         % (width, top + plot_h + 150, width, top + plot_h + 150),
         '<rect width="100%" height="100%" fill="white"/>',
         '<text x="%d" y="26" %s font-size="16" font-weight="bold">SI speedup over the baseline: ours '
         '(vgpu, timing-only) and the paper\'s</text>' % (left, FONT)]
    tick = 0.1 if ymax - ymin < 1.2 else 0.2
    v = round(ymin / tick) * tick
    while v <= ymax:
        if v >= ymin:
            s.append('<line x1="%d" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s"/>'
                     % (left, y(v), width - 30, y(v), "#888" if abs(v - 1) < 1e-9 else "#e6e6e6"))
            s.append('<text x="%d" y="%.1f" %s font-size="11" text-anchor="end">%.1f</text>'
                     % (left - 6, y(v) + 4, FONT, v))
        v += tick
    bw = min(28.0, group / 3.5)
    for i, r in enumerate(results):
        cx = left + group * (i + 0.5)
        ours, (pv, rng) = r.get("speedup"), paper_speedup(r)
        for val, dx, key in ((ours, -bw / 2 - 1, "ours"), (pv, bw / 2 + 1, "paper")):
            if not val:
                s.append('<text x="%.1f" y="%.1f" %s font-size="10" text-anchor="middle">n/a</text>'
                         % (cx + dx, y(1.0) - 4, FONT))
                continue
            y0, y1 = y(max(val, ymin)), y(1.0)
            s.append('<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"/>'
                     % (cx + dx - bw / 2, min(y0, y1), bw, abs(y1 - y0), colors[key]))
            s.append('<text x="%.1f" y="%.1f" %s font-size="10" text-anchor="middle">%.2f</text>'
                     % (cx + dx, min(y0, y1) - 4, FONT, val))
        if rng:
            x = cx + bw / 2 + 1
            s.append('<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>' % (x, y(rng[0]), x, y(rng[1])))
        if r.get("ideal_speedup"):
            yi = y(min(r["ideal_speedup"], ymax))
            s.append('<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2.5"/>'
                     % (cx - bw - 3, yi, cx + bw + 3, yi, colors["ideal"]))
        s.append('<text x="%.1f" y="%.1f" %s font-size="11" text-anchor="end" transform="rotate(-35 %.1f %.1f)">%s</text>'
                 % (cx, top + plot_h + 16, FONT, cx, top + plot_h + 16, escape(r["name"])))
    s += _legend(left, top + plot_h + 120,
                 (("ours", "ours: SI / baseline, virtual time"), ("paper", "paper: DHelix / Megatron"),
                  ("ideal", "our ideal bound")), colors)
    s.append('<text x="%d" y="%.1f" %s font-size="11" fill="#444">Hopper rows: the authors report MFU points '
             'only; the grey bar and whisker are those points applied to our baseline MFU.</text>'
             % (left, top + plot_h + 140, FONT))
    s.append("</svg>")
    return _write(out_stem, s)


def publish(pics, dest):
    """Copies the pictures into dest (docs/img); returns the copied names."""
    os.makedirs(dest, exist_ok=True)
    names = []
    for v in pics.values():
        if isinstance(v, dict):
            for k in ("svg", "png"):
                if v.get(k):
                    shutil.copy(v[k], os.path.join(dest, os.path.basename(v[k])))
                    names.append(os.path.basename(v[k]))
    return names


def main(argv):
    """pictures.py timeline|memory BASE_TRACE SI_TRACE OUT_STEM TITLE SUBTITLE [ITERS]: the
    timeline picture (scripts/demo uses it) or device memory over one iteration from two vgpu
    traces; prints the files written."""
    if len(argv) not in (7, 8) or argv[1] not in ("timeline", "memory"):
        print(main.__doc__, file=sys.stderr)
        return 2
    try:
        fn = timeline if argv[1] == "timeline" else memory
        r = fn(argv[2], argv[3], argv[4], argv[5], argv[6], iters=int(argv[7]) if len(argv) == 8 else 4)
    except (OSError, ValueError, KeyError) as e:
        print("pictures: %s" % e, file=sys.stderr)
        return 1
    print(json.dumps(r))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
