"use strict";
// hlorun compile report viewer: reads the JSON in #report-data and inflates
// gzip'd blobs (diffs, kernel bodies, instruction index) on demand.
(async function () {
  const D = JSON.parse(document.getElementById("report-data").textContent);
  const $ = (s, r) => (r || document).querySelector(s);
  const esc = (s) => String(s == null ? "" : s).replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" }[c]));
  const cache = {};
  async function blob(id) {
    if (id in cache) return cache[id];
    const el = document.getElementById(id);
    if (!el) return (cache[id] = null);
    const bin = Uint8Array.from(atob(el.textContent.trim()), (c) => c.charCodeAt(0));
    const stream = new Blob([bin]).stream().pipeThrough(new DecompressionStream("gzip"));
    return (cache[id] = await new Response(stream).text());
  }
  async function json(id) { const t = await blob(id); return t == null ? null : JSON.parse(t); }

  // ---- tabs ---------------------------------------------------------------
  function show(tab) {
    document.querySelectorAll("nav button").forEach((b) => b.classList.toggle("on", b.dataset.tab === tab));
    document.querySelectorAll("section.tab").forEach((s) => s.classList.toggle("on", s.id === tab));
  }
  document.querySelectorAll("nav button").forEach((b) => b.addEventListener("click", () => {
    show(b.dataset.tab);
    if (b.dataset.tab === "autotune") loadAutotune();
  }));

  // ---- HLO highlighting -----------------------------------------------------
  const SHAPE = /\b((?:pred|s4|s8|s16|s32|s64|u4|u8|u16|u32|u64|f16|bf16|f32|f64|c64|c128|f8e\w+|token)\[[^\]]*\](?:\{[^}]*\})?)/g;
  function hlo(line) {
    let s = esc(line);
    s = s.replace(/^([-+ ]?\s*(?:ROOT\s+)?)(%?)([\w.\-]+)(\s*=)/, (m, a, p, n, e) => `${a}<span class="iname" data-name="${n}">${p}${n}</span>${e}`);
    s = s.replace(SHAPE, '<span class="shp">$1</span>');
    s = s.replace(/\s([a-z][a-z0-9\-]*)\(/, ' <span class="op">$1</span>(');
    s = s.replace(/%([\w.\-]+)/g, (m, n) => `<span class="iname" data-name="${n}">%${n}</span>`);
    return s;
  }

  // ---- summary and problems -----------------------------------------------
  const S = D.summary;
  const ok = S.status === "ok";
  $("#summary").innerHTML = `<h1>hlorun compile: ${esc(S.module)} <span class="${ok ? "st-ok" : "st-bad"}">${esc(String(S.status).toUpperCase())}</span> (exit ${esc(S.exit_code)})</h1>
    <div class="kv"><span>input <b class="mono">${esc(S.input)}</b></span><span>pipeline <b>${esc(S.pipeline)}</b></span>
    <span>device <b>${esc(S.platform)} ${esc(S.device)}</b></span><span>hlorun <b>${esc(S.version)}</b></span>
    <span>total <b>${S.seconds == null ? "-" : S.seconds.toFixed(2) + " s"}</b></span>
    <span>${esc(S.passes_run)} passes, ${esc(S.passes_changed)} changed</span>
    <span>${esc(S.instructions_before)} &rarr; ${esc(S.instructions_after)} instructions</span></div>`;
  const probs = [];
  for (const v of D.violations) {
    probs.push(`<div class="problem"><b>[${esc(v.rule)}]</b> ${v.precondition_of ? "precondition of " + esc(v.precondition_of) + ", " : ""}first violated after
      <a data-pass="${v.pass_index}">#${esc(v.pass_index)} ${esc(v.after_pass)}</a>${v.instruction ? ` at <a data-follow="${esc(v.instruction)}">${esc(v.instruction)}</a>` : ""}: ${esc(v.message)}</div>`);
  }
  if (D.failure) {
    const f = D.failure;
    probs.push(`<div class="problem"><b>PASS FAILURE</b> in <a data-pass="${f.index}">#${esc(f.index)} ${esc(f.path)}</a>${f.instruction ? ` at <a data-follow="${esc(f.instruction)}">${esc(f.instruction)}</a>` : ""}: ${esc(f.message)}</div>`);
  }
  $("#problems").innerHTML = probs.join("");
  $("#problems").addEventListener("click", (e) => {
    const a = e.target.closest("a"); if (!a) return;
    if (a.dataset.pass) { show("timeline"); openPass(+a.dataset.pass, a.closest(".problem").querySelector("[data-follow]")?.dataset.follow); }
    if (a.dataset.follow) follow(a.dataset.follow);
  });

  // ---- pass timeline --------------------------------------------------------
  const maxSec = Math.max(1e-9, ...D.passes.map((p) => p.seconds));
  const passByIndex = {};
  D.passes.forEach((p) => (passByIndex[p.index] = p));
  function timeline() {
    const rows = [];
    let group = null;
    for (const p of D.passes) {
      const pipe = p.path.includes("/") ? p.path.slice(0, p.path.lastIndexOf("/")) : "";
      if (pipe && pipe !== group) {
        const members = D.passes.filter((q) => q.path.startsWith(pipe + "/"));
        const secs = members.reduce((a, q) => a + q.seconds, 0);
        rows.push(`<tr class="pipe" data-pipe="${esc(pipe)}"><td></td><td>&#9662; ${esc(pipe)}</td><td>${members.filter((q) => q.changed).length}/${members.length} changed</td><td></td><td>${(secs * 1e3).toFixed(1)}</td><td></td><td></td></tr>`);
      }
      group = pipe || null;
      const w = Math.max(1, Math.round((200 * p.seconds) / maxSec));
      rows.push(`<tr class="pass" data-index="${p.index}" data-in="${esc(pipe)}"><td>${p.index}</td><td class="mono">${esc(p.path)}</td>
        <td class="${p.changed ? "ch" : "un"}">${p.changed ? "changed" : "-"}</td><td>${esc(p.before)} &rarr; ${esc(p.after)}</td>
        <td>${(p.seconds * 1e3).toFixed(1)}</td><td><span class="bar" style="width:${w}px"></span></td>
        <td class="small muted">${p.n_remarks ? p.n_remarks + " remarks" : ""}</td></tr>`);
    }
    $("#timeline-table tbody").innerHTML = rows.join("");
  }
  timeline();
  $("#timeline-table tbody").addEventListener("click", (e) => {
    const pipe = e.target.closest("tr.pipe");
    if (pipe) {
      const name = pipe.dataset.pipe;
      const hide = !pipe.classList.contains("closed");
      pipe.classList.toggle("closed", hide);
      document.querySelectorAll(`tr.pass[data-in="${CSS.escape(name)}"]`).forEach((r) => (r.style.display = hide ? "none" : ""));
      return;
    }
    const tr = e.target.closest("tr.pass");
    if (tr) openPass(+tr.dataset.index);
  });

  let current = null, mode = "unified", limit = 4000;
  async function openPass(index, highlight) {
    current = index; limit = 4000;
    document.querySelectorAll("#timeline-table tr.pass").forEach((r) => r.classList.toggle("sel", +r.dataset.index === index));
    await renderDiff(highlight);
  }
  async function renderDiff(highlight) {
    const p = passByIndex[current];
    const box = $("#diff");
    if (!p) return;
    const head = `<h3>#${p.index} ${esc(p.path)} <span class="${p.changed ? "ch" : "un"}">${p.changed ? "changed" : "unchanged"}</span>
      <span class="muted small">${esc(p.before)} &rarr; ${esc(p.after)} instructions, ${(p.seconds * 1e3).toFixed(1)} ms</span></h3>
      ${p.remarks.length ? `<details><summary>${p.n_remarks} remarks</summary><pre>${p.remarks.map(esc).join("\n")}</pre></details>` : ""}`;
    if (!p.has_diff) {
      box.innerHTML = head + `<p class="muted">${p.changed ? "No diff was kept for this pass (compile with --diff changed)." : "This pass changed nothing."}</p>`;
      return;
    }
    const text = await blob("diff-" + p.index);
    const lines = text.split("\n");
    const shown = lines.slice(0, limit);
    let body;
    if (mode === "unified") {
      body = shown.map((l) => `<div class="${l.startsWith("@@") ? "d-hunk" : l[0] === "+" ? "d-add" : l[0] === "-" ? "d-del" : ""}">${hlo(l)}</div>`).join("");
    } else {
      const L = [], R = [];
      let i = 0;
      while (i < shown.length) {
        const l = shown[i];
        if (l.startsWith("@@") || l.startsWith("---") || l.startsWith("+++")) { L.push(`<div class="d-hunk">${esc(l)}</div>`); R.push(`<div class="d-hunk">&nbsp;</div>`); i++; continue; }
        if (l[0] === "-" || l[0] === "+") {
          const del = [], add = [];
          while (i < shown.length && shown[i][0] === "-" && !shown[i].startsWith("---")) del.push(shown[i++]);
          while (i < shown.length && shown[i][0] === "+" && !shown[i].startsWith("+++")) add.push(shown[i++]);
          for (let k = 0; k < Math.max(del.length, add.length); k++) {
            L.push(k < del.length ? `<div class="d-del">${hlo(del[k])}</div>` : "<div>&nbsp;</div>");
            R.push(k < add.length ? `<div class="d-add">${hlo(add[k])}</div>` : "<div>&nbsp;</div>");
          }
          continue;
        }
        L.push(`<div>${hlo(l)}</div>`); R.push(`<div>${hlo(l)}</div>`); i++;
      }
      body = `<div class="sbs"><div>${L.join("")}</div><div>${R.join("")}</div></div>`;
    }
    const more = lines.length > limit ? `<p><button id="more">show all ${lines.length} lines</button></p>` : "";
    box.innerHTML = head + `<div class="diff" id="diff-body">${body}</div>` + more;
    if (more) $("#more").addEventListener("click", () => { limit = Infinity; renderDiff(highlight); });
    if (highlight) {
      const el = box.querySelector(`.iname[data-name="${CSS.escape(highlight)}"]`);
      if (el) { el.closest("div").classList.add("hl"); el.scrollIntoView({ block: "center" }); }
    }
  }
  document.querySelectorAll("input[name=mode]").forEach((r) => r.addEventListener("change", () => { mode = r.value; renderDiff(); }));
  document.body.addEventListener("click", (e) => {
    const n = e.target.closest(".iname");
    if (n) follow(n.dataset.name);
  });

  // ---- follow one instruction -----------------------------------------------
  async function follow(name) {
    show("follow");
    const idx = (await json("blob-index")) || {};
    const hist = idx[name] || [];
    const kernels = (((await json("blob-o2k")) || {})[name] || []).slice();
    const kn = (await kernelIndex())[name];
    const remarks = [];
    for (const p of D.passes) for (const r of p.remarks) if (r.includes(name)) remarks.push(`#${p.index} ${p.path}: ${r}`);
    const rows = hist.map(([i, how]) => `<tr><td>${i}</td><td><button class="lnk" data-pass="${i}">${esc(passByIndex[i] ? passByIndex[i].path : i)}</button></td><td>${esc(how)}</td></tr>`).join("");
    $("#fpanel").innerHTML = `<h3 class="mono">${esc(name)}</h3>
      ${kn ? `<p>A final kernel (${esc(kn.kind)}). Came from: ${kn.origins.map((o) => `<button class="lnk" data-follow="${esc(o)}">${esc(o)}</button>`).join(", ") || "-"}</p>` : ""}
      <p>${kernels.length ? "Ended in kernel(s): " + kernels.map((k) => `<button class="lnk" data-kernel="${esc(k)}">${esc(k)}</button>`).join(", ") : kn ? "" : "Not an origin of any final kernel (removed, or lineage was off)."}</p>
      <table><thead><tr><th>#</th><th>pass</th><th>what happened</th></tr></thead><tbody>${rows || '<tr><td colspan="3" class="muted">no pass diff mentions it</td></tr>'}</tbody></table>
      ${remarks.length ? `<h4>remarks</h4><pre>${remarks.slice(0, 200).map(esc).join("\n")}</pre>` : ""}`;
  }
  $("#fpanel").addEventListener("click", (e) => {
    const b = e.target.closest("button"); if (!b) return;
    const name = $("#fpanel h3").textContent;
    if (b.dataset.pass) { show("timeline"); openPass(+b.dataset.pass, name); }
    else if (b.dataset.follow) follow(b.dataset.follow);
    else if (b.dataset.kernel) { show("kernels"); openKernel(b.dataset.kernel); }
  });
  $("#follow-go").addEventListener("click", () => follow($("#follow-name").value.trim().replace(/^%/, "")));

  // ---- kernels ---------------------------------------------------------------
  let kernelByName = null;
  async function kernelIndex() {
    if (!kernelByName) {
      kernelByName = {};
      ((await json("blob-kernels")) || []).forEach((k) => (kernelByName[k.name] = k));
    }
    return kernelByName;
  }
  async function openKernel(name) {
    const k = (await kernelIndex())[name];
    if (!k) return;
    const bodies = (await json("blob-bodies")) || {};
    $("#kpanel").innerHTML = `<h3 class="mono">${esc(k.name)}</h3><p>${esc(k.kind)} &middot; ${esc(k.category)} &middot; <span class="mono">${esc(k.shape)}</span>${k.hero ? " &middot; hero " + esc(k.hero) : ""}</p>
      <p>Formed by: ${k.formed_by.map(esc).join(", ") || "-"}</p>
      <p>Operands: ${k.operands.map((o) => `<button class="lnk" data-kernel="${esc(o)}">${esc(o)}</button>`).join(", ") || "-"}</p>
      <p>Came from: ${k.origins.slice(0, 60).map((o) => `<button class="lnk" data-follow="${esc(o)}">${esc(o)}</button>`).join(", ") || "-"}${k.origins.length > 60 ? " ..." : ""}</p>
      ${k.story.length ? `<h4>why</h4><pre>${k.story.map(esc).join("\n")}</pre>` : ""}
      ${bodies[name] ? `<h4>body</h4><pre>${bodies[name].split("\n").map(hlo).join("\n")}</pre>` : ""}`;
  }
  async function openGroup(name) {
    const members = D.groups[name] || [];
    await kernelIndex();
    $("#kpanel").innerHTML = `<h3>${esc(name)}: ${members.length} kernels</h3>` + members.map((m) => `<button class="lnk" data-kernel="${esc(m)}">${esc(m)}</button> <span class="muted small">${esc(kernelByName[m] ? kernelByName[m].kind : "")}</span>`).join("<br>");
  }
  const graph = $("#kgraph");
  if (graph) graph.addEventListener("click", (e) => {
    const g = e.target.closest(".knode"); if (!g) return;
    if (g.dataset.kernel) openKernel(g.dataset.kernel); else openGroup(g.dataset.group);
  });
  $("#kpanel").addEventListener("click", (e) => {
    const b = e.target.closest("button"); if (!b) return;
    if (b.dataset.kernel) openKernel(b.dataset.kernel); else if (b.dataset.follow) follow(b.dataset.follow);
  });
  let ktable = false;
  $("#ktable").closest("details").addEventListener("toggle", async () => {
    if (ktable) return;
    ktable = true;
    const ks = (await json("blob-kernels")) || [];
    $("#ktable tbody").innerHTML = ks.map((k) => `<tr><td><button class="lnk" data-kernel="${esc(k.name)}">${esc(k.name)}</button></td><td>${esc(k.kind)}</td><td class="mono">${esc(k.shape)}</td><td>${esc(k.formed_by.join(", "))}</td></tr>`).join("");
  });
  $("#ktable").addEventListener("click", (e) => { const b = e.target.closest("button"); if (b) openKernel(b.dataset.kernel); });

  // ---- autotuner ---------------------------------------------------------------
  let sortKey = null, sortDir = 1;
  let AT = [];
  const cols = [["instruction", "GEMM"], ["shape", "shape"], ["types", "types"], ["winner", "chosen"], ["winner_us", "us"], ["runner_up", "runner-up"], ["margin", "margin"], ["flip_rate", "flip risk"], ["considered", "candidates"], ["nrej", "rejected"]];
  function atTable() {
    const rows = AT.slice();
    if (sortKey) rows.sort((a, b) => { const x = a[sortKey], y = b[sortKey]; return (x == null) - (y == null) || (x < y ? -1 : x > y ? 1 : 0) * sortDir; });
    $("#attable thead").innerHTML = "<tr>" + cols.map(([k, l]) => `<th data-key="${k}">${l}${sortKey === k ? (sortDir > 0 ? " &#9650;" : " &#9660;") : ""}</th>`).join("") + "</tr>";
    $("#attable tbody").innerHTML = rows.map((r, i) => `<tr class="atrow" data-i="${AT.indexOf(r)}"><td class="mono">${esc(r.instruction)}</td><td class="mono">${esc(r.shape)}</td><td>${esc(r.types)}</td><td>${esc(r.winner)}</td>
      <td>${r.winner_us == null ? "" : r.winner_us.toFixed(2)}</td><td>${esc(r.runner_up)}</td><td>${r.margin == null ? "" : (100 * r.margin).toFixed(1) + "%"}</td>
      <td>${r.flip_rate == null ? "" : (100 * r.flip_rate).toFixed(0) + "%"}</td><td>${esc(r.considered)}</td><td>${r.nrej}</td></tr>`).join("");
  }
  let atLoaded = false;
  async function loadAutotune() {
    if (atLoaded || !D.n_autotune) return;
    atLoaded = true;
    AT = (await json("blob-autotune")) || [];
    AT.forEach((r) => (r.nrej = r.rejected.length));
    atTable();
  }
  if (D.n_autotune) {
    $("#attable thead").addEventListener("click", (e) => { const th = e.target.closest("th"); if (!th) return; const k = th.dataset.key; sortDir = sortKey === k ? -sortDir : 1; sortKey = k; atTable(); });
    $("#attable tbody").addEventListener("click", (e) => {
      const tr = e.target.closest("tr"); if (!tr) return;
      const r = AT[+tr.dataset.i];
      $("#atpanel").innerHTML = `<h3 class="mono">${esc(r.instruction)}</h3><p>${esc(r.device)}, ${esc(r.source)}; chosen ${esc(r.winner)}</p>
        <h4>rejected (${r.rejected.length})</h4><pre>${r.rejected.map((c) => esc(c.label + ": " + (c.reasons || []).join("; "))).join("\n") || "-"}</pre>
        <h4>fastest candidates</h4><pre>${r.candidates.map((c) => esc(`${c.label}  ${c.us == null ? "-" : c.us.toFixed(2) + " us"}${c.feasible ? "" : "  (infeasible)"}`)).join("\n")}</pre>
        ${r.notes.length ? `<pre>${r.notes.map(esc).join("\n")}</pre>` : ""}`;
    });
  }
  window.hlorunReport = { openPass, follow, openKernel, show };
  document.body.dataset.ready = "1";
})();
