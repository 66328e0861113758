// The portal's own script: behaviour that would otherwise be inline (the Content-Security-
// Policy allows scripts from this site only, never inline ones).
document.addEventListener("DOMContentLoaded", function () {
  var switcher = document.getElementById("ws-switch");
  if (switcher) {
    switcher.addEventListener("change", function () {
      if (switcher.value) {
        window.location.href = "/w/" + encodeURIComponent(switcher.value) + "/";
      }
    });
  }
});
