// The filter box: show only the clusters whose ids or text contain what is
// typed. No data leaves the page; nothing is fetched.
(function () {
  "use strict";
  var box = document.getElementById("filter");
  var clusters = Array.prototype.slice.call(document.querySelectorAll("details.cluster"));
  if (box) {
    box.addEventListener("input", function () {
      var wanted = box.value.trim().toLowerCase();
      clusters.forEach(function (c) {
        var shown = wanted === "" || c.textContent.toLowerCase().indexOf(wanted) >= 0;
        c.classList.toggle("hidden", !shown);
      });
    });
  }
  document.body.setAttribute("data-ready", String(clusters.length));
})();
