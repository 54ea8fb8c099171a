// Fills the detail panel with the event under the pointer or the focus:
// what it did, the SQL it ran and the rows it changed, from the ledger.
(function () {
  "use strict";
  var panel = document.getElementById("detail");
  if (!panel) { return; }
  function text(tag, cls, s) {
    var el = document.createElement(tag);
    if (cls) { el.className = cls; }
    el.textContent = s;
    return el;
  }
  function show(ev) {
    var d = ev.dataset;
    panel.textContent = "";
    panel.appendChild(text("h3", "", "#" + d.seq + " " + d.actor + ": " + d.action));
    panel.appendChild(text("div", "", d.at + " \u00b7 " + d.kind + (d.refusal ? " \u00b7 " + d.refusal : "")));
    panel.appendChild(text("p", "", d.detail));
    if (d.rows !== "") {
      panel.appendChild(text("div", "rows" + (d.rows === "0" ? " zero" : ""), "Rows this event changed: " + d.rows));
    }
    var sql = [];
    try { sql = JSON.parse(d.sql || "[]"); } catch (e) { sql = []; }
    if (sql.length === 0) {
      panel.appendChild(text("p", "muted", "No statement of the ledger belongs to this kind of event."));
    } else {
      panel.appendChild(text("p", "muted", "The run's statements for this kind of event, with their totals over the whole run from the statement ledger (this event ran one or more of them):"));
    }
    sql.forEach(function (s) {
      var n = function (k, one, many) { return k + " " + (Number(k) === 1 ? one : many); };
      panel.appendChild(text("div", "", s.name + " (ledger: ran " + n(s.runs, "time", "times") + ", " + n(s.rows, "row", "rows") + " in all)"));
      panel.appendChild(text("pre", "", s.sql));
    });
  }
  var events = document.querySelectorAll("svg .ev");
  events.forEach(function (ev) {
    ev.addEventListener("mouseenter", function () { show(ev); });
    ev.addEventListener("focus", function () { show(ev); });
  });

  // Step mode, for lecturing: the arrow keys reveal the events one at a
  // time, in the timeline's order, each with its sentence shown large;
  // Page Down and Page Up go to the next part of the run (a chapter: a
  // clock segment), Home hides every event, End shows them all.
  var banner = document.getElementById("step");
  var order = Array.prototype.slice.call(events).sort(function (a, b) { return a.dataset.seq - b.dataset.seq; });
  if (!banner || order.length === 0) { return; }
  var shown = -1; // index of the last event revealed; -1: none
  var stepping = false;
  // What belongs to an event (a lease from its claim, a renewal's mark,
  // an offer's or a delivery's arrow) carries its data-seq, and is shown
  // with it.
  var parts = document.querySelectorAll(".leases [data-seq], .arrows [data-seq]");
  function draw() {
    order.forEach(function (ev, i) { ev.classList.toggle("future", stepping && i > shown); });
    var last = shown < 0 ? -1 : Number(order[shown].dataset.seq);
    Array.prototype.forEach.call(parts, function (el) {
      el.classList.toggle("future", stepping && Number(el.dataset.seq) > last);
    });
    if (!stepping) { return; }
    if (shown < 0) {
      banner.textContent = "Step mode: \u2192 reveals the next event (\u2190 back, Page Down/Up by part, End shows all).";
      return;
    }
    if (order[shown].scrollIntoView) { order[shown].scrollIntoView({block: "nearest"}); }
    var d = order[shown].dataset;
    banner.textContent = "#" + d.seq + " " + d.at + " \u00b7 " + d.actor + " " + d.action + ": " + d.detail + (d.refusal ? " (" + d.refusal + ")" : "");
    show(order[shown]);
  }
  function go(i) {
    stepping = true;
    banner.hidden = false;
    shown = Math.max(-1, Math.min(order.length - 1, i));
    draw();
  }
  // chapterStart is the first event of the part the event at i is in.
  function chapterStart(i) {
    while (i > 0 && order[i - 1].dataset.seg === order[i].dataset.seg) { i--; }
    return i;
  }
  // chapter reveals up to the first event of the next part (dir 1), or
  // back to the start of this part, or of the one before (dir -1).
  function chapter(dir) {
    if (dir > 0) {
      var seg = shown < 0 ? null : order[shown].dataset.seg;
      for (var i = shown + 1; i < order.length; i++) {
        if (order[i].dataset.seg !== seg) { return go(i); }
      }
      return go(order.length - 1);
    }
    if (shown <= 0) { return go(-1); }
    var start = chapterStart(shown);
    go(start < shown ? start : (start === 0 ? -1 : chapterStart(start - 1)));
  }
  document.addEventListener("keydown", function (e) {
    if (e.altKey || e.ctrlKey || e.metaKey) { return; }
    // Until → or Page Down starts it, step mode leaves every key to the
    // page (the arrows and Home scroll as they always do).
    if (!stepping && e.key !== "ArrowRight" && e.key !== "PageDown") { return; }
    switch (e.key) {
      case "ArrowRight": go(shown + 1); break;
      case "ArrowLeft": go(shown - 1); break;
      case "PageDown": chapter(1); break;
      case "PageUp": chapter(-1); break;
      case "Home": go(-1); break;
      case "End": stepping = false; banner.hidden = true; draw(); break;
      default: return;
    }
    e.preventDefault();
  });
})();
