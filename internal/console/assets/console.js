// Logbook console: the live tail and the page's JSON link. No framework,
// nothing loaded from elsewhere.
(function () {
  "use strict";

  // The JSON this page renders from: /ui/api/<page> with the same query.
  var api = document.querySelector(".api-link");
  if (api) {
    var p = location.pathname === "/" ? "/overview" : location.pathname;
    api.href = "/ui/api" + p + location.search;
    api.textContent = api.href.replace(location.origin, "");
  }

  var tail = document.getElementById("tail");
  if (!tail) { return; }
  var list = document.getElementById("tail-events");
  var status = document.getElementById("tail-status");
  var toggle = document.getElementById("tail-toggle");
  var prefixIn = document.getElementById("tail-prefix");
  var form = document.getElementById("tail-form");
  var next = Number(tail.getAttribute("data-from")) || 0;
  var src = null;
  var paused = false;
  var shown = 0;
  var maxShown = 500;

  function say(s) { status.textContent = s; }

  function add(ev) {
    var li = document.createElement("li");
    li.setAttribute("value", String(ev.seq));
    li.setAttribute("data-seq", String(ev.seq));
    li.setAttribute("data-type", ev.type);
    li.textContent = ev.type + "  " + (ev.binary ? "0x" : "") + ev.payload + (ev.bytes > 256 ? " … (" + ev.bytes + " bytes)" : "");
    list.insertBefore(li, list.firstChild);
    shown++;
    while (shown > maxShown && list.lastChild) { list.removeChild(list.lastChild); shown--; }
  }

  function open() {
    if (src) { src.close(); }
    var url = "/ui/api/tail?from=" + next + "&prefix=" + encodeURIComponent(prefixIn.value);
    src = new EventSource(url);
    src.addEventListener("hello", function (m) {
      var h = JSON.parse(m.data);
      say("following from seq " + h.from + (h.prefix ? ", types starting with \"" + h.prefix + "\"" : ""));
    });
    src.addEventListener("event", function (m) {
      var ev = JSON.parse(m.data);
      next = ev.seq + 1;
      add(ev);
    });
    src.addEventListener("trimmed", function (m) {
      var t = JSON.parse(m.data);
      next = t.first;
      say("seqs before " + t.first + " were trimmed; following from there");
    });
    src.addEventListener("bye", function () { say("the member is shutting down"); });
    src.onerror = function () { if (!paused) { say("disconnected; retrying…"); } };
  }

  toggle.addEventListener("click", function () {
    paused = !paused;
    if (paused) {
      if (src) { src.close(); src = null; }
      toggle.textContent = "Resume";
      say("paused at seq " + next);
    } else {
      toggle.textContent = "Pause";
      open();
    }
  });
  form.addEventListener("submit", function (e) {
    e.preventDefault();
    while (list.firstChild) { list.removeChild(list.firstChild); }
    shown = 0;
    if (!paused) { open(); }
  });
  open();
})();
