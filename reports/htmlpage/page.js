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
})();
