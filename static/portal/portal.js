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

// A "Copy" button (data-copy: the id of the element whose text it copies), on the page or
// swapped in by htmx later: to the clipboard, or, where the browser does not allow that,
// selected for the user to copy. What happened is said next to it (.copied).
document.addEventListener("click", function (event) {
  var button = event.target.closest ? event.target.closest("button[data-copy]") : null;
  if (!button) {
    return;
  }
  var source = document.getElementById(button.getAttribute("data-copy"));
  if (!source) {
    return;
  }
  var said = button.parentNode.querySelector(".copied");
  function say(words) {
    if (said) {
      said.textContent = words;
    }
  }
  function select() {
    var range = document.createRange();
    range.selectNodeContents(source);
    var selection = window.getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
    say("Selected: press Ctrl+C (⌘C) to copy.");
  }
  var text = source.textContent.trim();
  if (navigator.clipboard && window.isSecureContext) {
    navigator.clipboard.writeText(text).then(function () {
      say("Copied.");
    }, select);
  } else {
    select();
  }
});
