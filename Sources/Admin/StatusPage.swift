/// The status page (`GET /` on the admin listener) and its script
/// (`GET /status.js`): no external assets, so it works offline. The script
/// polls the admin API every two seconds and draws the charts as SVG.
/// Everything a client sent (targets) is put in the page as text, never as
/// markup, and the page's Content-Security-Policy allows no inline script.
enum StatusPage {
    static let securityPolicy = "default-src 'none'; script-src 'self'; style-src 'unsafe-inline'; connect-src 'self'; "
        + "img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

    static let html = """
        <!doctype html>
        <html lang="en"><head><meta charset="utf-8"><title>Larder</title>
        <meta name="viewport" content="width=device-width, initial-scale=1"><link rel="icon" href="data:,">
        <style>
        body{font:14px/1.4 system-ui,sans-serif;margin:0;background:#f6f7f9;color:#1d2330}
        header{background:#1d2330;color:#fff;padding:10px 20px;display:flex;gap:24px;align-items:baseline;flex-wrap:wrap}
        header h1{font-size:18px;margin:0}
        header span{color:#c9d1e0}
        main{display:grid;grid-template-columns:repeat(auto-fit,minmax(460px,1fr));gap:16px;padding:16px}
        section{background:#fff;border:1px solid #dde2ea;border-radius:6px;padding:12px 16px}
        h2{font-size:14px;margin:0 0 8px;color:#4a5568;text-transform:uppercase;letter-spacing:.04em}
        svg{width:100%;height:170px;display:block}
        .grid{stroke:#e6e9ef}.axis{fill:#7a8599;font-size:10px}
        table{border-collapse:collapse;width:100%;font-size:13px}
        td,th{text-align:left;padding:3px 6px;border-bottom:1px solid #eef0f4}
        td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}
        td.t{max-width:420px;overflow:hidden;text-overflow:ellipsis;white-space:nowrap;font-family:ui-monospace,monospace}
        .bar{height:14px;background:#e6e9ef;border-radius:3px;overflow:hidden;margin:4px 0 10px}
        .bar div{height:100%;background:#7c5cc4}
        .key{display:inline-block;width:10px;height:10px;border-radius:2px;margin:0 4px 0 10px;opacity:.7}
        #problem{color:#b42318;font-weight:600}
        </style></head>
        <body data-updates="0" data-errors="0">
        <header><h1>Larder</h1><span id="who"></span><span id="rate">- req/s</span><span id="ratio">hit ratio -</span>
        <span id="conns">- connections</span><span id="uptime">up -</span><span id="fleet"></span><span id="clock"></span><span id="problem"></span></header>
        <main>
        <section><h2>Requests per second (last 15 minutes at most)</h2>
        <svg id="requests-chart" viewBox="0 0 600 170" preserveAspectRatio="none"></svg>
        <div><span class="key" style="background:#2f6fdf"></span>requests<span class="key" style="background:#e0861a"></span>misses
        <span class="key" style="background:#d92d20"></span>errors</div></section>
        <section><h2>Hit ratio (last 15 minutes at most)</h2>
        <svg id="ratio-chart" viewBox="0 0 600 170" preserveAspectRatio="none"></svg></section>
        <section><h2>Storage</h2><div id="tiers"></div></section>
        <section><h2>Upstream servers</h2><table id="servers"></table></section>
        <section><h2>Top URLs, last minute</h2><table id="top-requests"></table></section>
        <section><h2>Top URLs by misses, last minute</h2><table id="top-misses"></table></section>
        <section><h2>Top prefixes, last minute</h2><table id="top-prefixes"></table></section>
        <section><h2>Recent errors (times in UTC)</h2><table id="errors"></table></section>
        </main>
        <script src="/status.js"></script>
        </body></html>

        """

    static let script = """
        "use strict";
        const NS = "http://www.w3.org/2000/svg", WINDOW = 900, GAP = 3;
        let points = [], lastTime = 0;
        window.addEventListener("error", () => { document.body.dataset.errors = Number(document.body.dataset.errors) + 1; });
        function $(id) { return document.getElementById(id); }
        function svg(name, attributes, parent) {
          const node = document.createElementNS(NS, name);
          for (const key in attributes) node.setAttribute(key, attributes[key]);
          parent.appendChild(node);
          return node;
        }
        function number(n) {
          if (n >= 1e6) return (n / 1e6).toFixed(1) + "M";
          if (n >= 1e4) return (n / 1e3).toFixed(0) + "k";
          return n >= 100 || Number.isInteger(n) ? n.toFixed(0) : n.toFixed(1);
        }
        function bytes(n) {
          const units = ["B", "KiB", "MiB", "GiB", "TiB"];
          let i = 0;
          while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
          return (i ? n.toFixed(1) : n) + " " + units[i];
        }
        function duration(s) {
          if (s < 120) return s + " s";
          if (s < 7200) return Math.floor(s / 60) + " min";
          if (s < 172800) return Math.floor(s / 3600) + " h";
          return Math.floor(s / 86400) + " d";
        }
        // Seconds since 1970 as the time of day in UTC ("14:03:07").
        function utc(seconds) { return new Date(seconds * 1000).toISOString().substring(11, 19); }
        // A series' points in runs without a gap: a second with no point (the
        // hit ratio of an idle second, a restart, a page asleep) ends a line
        // rather than being drawn across.
        function runs(data) {
          const out = [];
          let run = [];
          for (const p of data) {
            if (run.length && p[0] - run[run.length - 1][0] > GAP) { out.push(run); run = []; }
            run.push(p);
          }
          if (run.length) out.push(run);
          return out;
        }
        // The last errors, the same URL, status and Cache-Status once, with
        // how many times and when last (newest first).
        function grouped(errors) {
          const groups = new Map();
          for (const e of errors) {
            const key = JSON.stringify([e.method, e.target, e.status, e.cache]);
            const group = groups.get(key);
            if (group) { group.count++; group.time = Math.max(group.time, e.time); }
            else groups.set(key, {what: e.method + " " + e.target, status: e.status, cache: e.cache, time: e.time, count: 1});
          }
          return Array.from(groups.values()).sort((a, b) => b.time - a.time);
        }
        // Draws series (lists of [time, value]) on a chart: across, the time
        // since the first point (20 s at least, 15 minutes at most); up, 0 to
        // a round maximum (or to `top`).
        function chart(id, series, top, unit) {
          const node = $(id), width = 600, height = 170, left = 40, bottom = 18;
          while (node.firstChild) node.removeChild(node.firstChild);
          const now = points.length ? points[points.length - 1].time : Math.floor(Date.now() / 1000);
          const span = Math.min(WINDOW, Math.max(20, points.length ? now - points[0].time : 0));
          let max = top;
          if (max === undefined) {
            max = 1;
            for (const s of series) for (const p of s.data) max = Math.max(max, p[1]);
            const step = Math.pow(10, Math.floor(Math.log10(max)));
            max = Math.ceil(max / step) * step;
          }
          for (let i = 0; i <= 4; i++) {
            const y = 4 + (height - bottom - 4) * i / 4;
            svg("line", {x1: left, x2: width, y1: y, y2: y, class: "grid"}, node);
            svg("text", {x: left - 4, y: y + 3, "text-anchor": "end", class: "axis"}, node).textContent = number(max * (4 - i) / 4) + unit;
          }
          for (let i = 0; i <= 3; i++) {
            const ago = Math.round(span * (3 - i) / 3), x = left + (width - left) * i / 3;
            svg("text", {x: x, y: height - 4, "text-anchor": i === 0 ? "start" : i === 3 ? "end" : "middle", class: "axis"}, node)
              .textContent = ago ? "-" + (ago < 120 ? ago + " s" : Math.round(ago / 60) + " min") : "now";
          }
          for (const s of series) {
            for (const run of runs(s.data.filter(p => p[0] >= now - span))) {
              const coordinates = run.map(p => {
                const x = left + (width - left) * (p[0] - (now - span)) / span;
                const y = 4 + (height - bottom - 4) * (1 - Math.min(p[1], max) / max);
                return x.toFixed(1) + "," + y.toFixed(1);
              });
              svg("polyline", {points: coordinates.join(" "), fill: "none", stroke: s.color, "stroke-width": 2,
                               "data-series": s.name, "data-points": coordinates.length, "vector-effect": "non-scaling-stroke"}, node);
            }
          }
        }
        function rows(id, headings, list, cells) {
          const table = $(id);
          while (table.firstChild) table.removeChild(table.firstChild);
          const head = table.insertRow();
          headings.forEach((h, i) => {
            const th = document.createElement("th");
            th.textContent = h;
            if (i) th.className = "n";
            head.appendChild(th);
          });
          if (!list.length) { table.insertRow().insertCell().textContent = "nothing yet"; return; }
          for (const item of list) {
            const row = table.insertRow();
            cells(item).forEach((value, i) => {
              const cell = row.insertCell();
              cell.textContent = value;
              cell.className = i ? "n" : "t";
              if (!i) cell.title = value;
            });
          }
        }
        async function get(path) {
          const response = await fetch(path, {credentials: "same-origin", cache: "no-store"});
          if (response.status === 401) throw new Error("not signed in: open this page as /?token=YOUR_ADMIN_TOKEN");
          if (!response.ok) throw new Error(path + ": " + response.status);
          return response.json();
        }
        function drawTiers(stats) {
          const tiers = $("tiers");
          while (tiers.firstChild) tiers.removeChild(tiers.firstChild);
          for (const name of ["memory", "disk"]) {
            const tier = stats[name];
            if (!tier) continue;
            const share = tier.limit_bytes ? Math.min(1, tier.bytes / tier.limit_bytes) : 0;
            const label = document.createElement("div");
            label.textContent = name + ": " + bytes(tier.bytes) + " of " + bytes(tier.limit_bytes) + ", " +
              tier.objects + " responses, " + tier.evictions + " evicted";
            const bar = document.createElement("div"), fill = document.createElement("div");
            bar.className = "bar";
            fill.style.width = (share * 100).toFixed(1) + "%";
            bar.appendChild(fill);
            tiers.appendChild(label);
            tiers.appendChild(bar);
          }
        }
        async function update() {
          try {
            const [history, stats, top, errors] = await Promise.all([
              get("/history?since=" + lastTime), get("/stats"), get("/top?limit=10"), get("/errors")]);
            points = points.concat(history.points).filter(p => p.time > history.now - WINDOW);
            if (points.length) lastTime = points[points.length - 1].time;
            const recent = points.slice(-5), sum = (list, key) => list.reduce((a, p) => a + p[key], 0);
            const perSecond = key => points.map(p => [p.time, p[key] / p.seconds]);
            const lookups = sum(recent, "hits") + sum(recent, "misses");
            $("rate").textContent = number(recent.length ? sum(recent, "requests") / sum(recent, "seconds") : 0) + " req/s";
            $("ratio").textContent = "hit ratio " + (lookups ? (100 * sum(recent, "hits") / lookups).toFixed(1) + " %" : "-") +
              " now, " + (100 * stats.hit_ratio).toFixed(1) + " % since start";
            $("conns").textContent = stats.open_connections + " connections";
            $("uptime").textContent = "up " + duration(stats.uptime_seconds);
            $("who").textContent = stats.node + " · Larder " + stats.version + " · upstream " + stats.upstream;
            $("clock").textContent = utc(history.now) + " UTC";
            const f = stats.fleet;
            $("fleet").textContent = f ? "fleet " + f.name + ": " + (f.master ? "master " + f.master : "NO MASTER") +
              (f.sentinel ? ", " + f.failovers + " failovers, " + duration(f.seconds_without_master) + " without a master" : "") : "";
            chart("requests-chart", [
              {name: "requests", color: "#2f6fdf", data: perSecond("requests")}, {name: "misses", color: "#e0861a", data: perSecond("misses")},
              {name: "errors", color: "#d92d20", data: perSecond("errors")}], undefined, "");
            chart("ratio-chart", [{name: "hit ratio", color: "#2a9d4b", data: points.filter(p => p.hits + p.misses > 0)
              .map(p => [p.time, 100 * p.hits / (p.hits + p.misses)])}], 100, "%");
            drawTiers(stats);
            const servers = [];
            for (const pool of stats.upstreams || []) for (const s of pool.servers) servers.push(Object.assign({pool: pool.name}, s));
            rows("servers", ["server", "state", "requests", "errors", "avg ms"], servers,
                 s => [s.pool + " " + s.url, s.up ? "up" : s.healthy === false ? "unhealthy" : "left out", s.requests, s.errors, s.average_ms]);
            rows("top-requests", ["URL", "requests", "misses", "errors"], top.by_requests, t => [t.target, t.requests, t.misses, t.errors]);
            rows("top-misses", ["URL", "misses", "requests"], top.by_misses, t => [t.target, t.misses, t.requests]);
            rows("top-prefixes", ["prefix", "requests", "misses"], top.prefixes, t => [t.prefix, t.requests, t.misses]);
            rows("errors", ["URL", "times", "last", "status", "cache"], grouped(errors.errors),
                 e => [e.what, e.count, utc(e.time), e.status, e.cache]);
            $("problem").textContent = "";
            document.body.dataset.updates = Number(document.body.dataset.updates) + 1;
          } catch (error) {
            $("problem").textContent = String(error.message || error);
          }
        }
        update();
        setInterval(update, 2000);

        """
}
