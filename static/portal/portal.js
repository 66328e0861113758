// The portal's own script: behaviour that would otherwise be inline (the Content-Security-
// Policy allows scripts from this site only, never inline ones). Every handler is delegated
// from the document, so fragments htmx swaps in later behave as the page did.
(function () {
  "use strict";

  // A long token's Copy button (templates/_token.html): shown only where it can work.
  function showCopyButtons(root) {
    root.querySelectorAll("button.copy[hidden]").forEach(function (button) {
      button.hidden = false;
    });
  }

  // A Copy button copies its data-copy text, or the text of the element data-copy-from names
  // (a secret shown once). What happened is said on the button, or in a .copied status
  // beside it when there is one.
  function copied(button, ok) {
    var said = button.parentElement && button.parentElement.querySelector(".copied");
    if (said) {
      said.textContent = ok ? "Copied." : "Selected: press Ctrl+C (\u2318C) to copy.";
      return;
    }
    button.textContent = ok ? "Copied" : "Select and copy";
    window.setTimeout(function () { button.textContent = "Copy"; }, 1600);
  }

  function copySource(button) {
    var id = button.getAttribute("data-copy-from");
    if (id) return document.getElementById(id);
    return button.parentElement && button.parentElement.querySelector(".token-value");
  }

  function copyText(button) {
    var source = copySource(button);
    var text = button.hasAttribute("data-copy-from")
      ? (source ? source.textContent.trim() : "")
      : button.getAttribute("data-copy") || "";
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(
        function () { copied(button, true); },
        function () { copied(button, false); }
      );
      return;
    }
    // Plain http on another host: select the text and let the browser copy the selection.
    if (!source) { copied(button, false); return; }
    var range = document.createRange();
    range.selectNodeContents(source);
    var selection = window.getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
    var ok = false;
    try { ok = document.execCommand("copy"); } catch (e) { ok = false; }
    copied(button, ok);
  }

  // A preview (the floor's or a workload's impact) describes the form as it was when it was
  // computed: once the form changes, it says it is out of date until it is computed again.
  // The form names its preview's container (data-preview); fields that do not change the
  // preview (the change comment) carry data-preview-ignore.
  function markPreviewStale(event) {
    var field = event.target;
    if (!(field instanceof Element) || field.hasAttribute("data-preview-ignore")) return;
    markFormStale(field.form || field.closest("form"));
  }

  function markFormStale(form) {
    var target = form && form.getAttribute("data-preview");
    var box = target && document.getElementById(target);
    if (!box) return;
    var previews = Array.prototype.slice.call(box.querySelectorAll(".preview"));
    if (box.matches(".preview")) previews.push(box);
    previews.forEach(function (preview) {
      if (preview.classList.contains("stale")) return;
      preview.classList.add("stale");
      var note = preview.querySelector(".stale-note");
      if (note) note.textContent = note.getAttribute("data-text") || "Out of date.";
    });
  }

  // What a preview describes: the form's values when its request left, less the fields that
  // do not change it. A preview that arrives after further edits is marked out of date at once.
  function previewState(form) {
    var data = new FormData(form);
    form.querySelectorAll("[data-preview-ignore][name]").forEach(function (field) {
      data.delete(field.getAttribute("name"));
    });
    return new URLSearchParams(data).toString();
  }

  function previewForm(event) {
    var elt = event.detail && event.detail.elt;
    if (!(elt instanceof Element)) return null;
    var form = elt.matches("form") ? elt : elt.form || elt.closest("form");
    return form && form.hasAttribute("data-preview") ? form : null;
  }

  // "Set to the floor's value" on a workload axis in error: the axis's inputs are replaced by
  // the floor's (a <template> rendered beside them), and the form is checked again.
  function setToFloor(button) {
    var name = button.getAttribute("data-floor-axis");
    var template = document.getElementById("floor-value-" + name);
    var slot = document.querySelector("#axis-" + name + " .axis-value");
    if (!template || !slot) return;
    slot.replaceChildren(template.content.cloneNode(true));
    var set = document.querySelector("#axis-" + name + " input[value=set]");
    if (set) set.checked = true;
    var first = slot.querySelector("input, select");
    if (first) {
      first.dispatchEvent(new Event("change", { bubbles: true }));
      first.focus();
    }
  }

  // Error slots (templates/_error_slot.html) that an htmx response filled or cleared: the
  // field each names follows (aria-invalid), and a folded section holding an error opens.
  function followErrorSlots() {
    document.querySelectorAll(".field-error[data-field]").forEach(function (slot) {
      var field = document.getElementById(slot.getAttribute("data-field"));
      if (!field) return;
      if (slot.textContent.trim()) field.setAttribute("aria-invalid", "true");
      else field.removeAttribute("aria-invalid");
    });
    document.querySelectorAll("details:not([open]) .field-error").forEach(function (slot) {
      if (slot.textContent.trim()) slot.closest("details").open = true;
    });
  }

  document.addEventListener("click", function (event) {
    var target = event.target instanceof Element ? event.target : null;
    var copy = target && target.closest("button.copy");
    if (copy) { copyText(copy); return; }
    var floor = target && target.closest("button[data-floor-axis]");
    if (floor) setToFloor(floor);
  });
  // A live check answers with the Save button's row out of band. Swapping the button itself
  // would lose a click pressed before the answer and released after it (pressing Save blurs
  // the field whose change sends the check): the row's [data-keep] element stays, takes the
  // new one's attributes, and only what is around it is replaced.
  function keepPressedControls(event) {
    var row = event.detail.target;
    var fresh = event.detail.fragment.firstElementChild;
    if (!fresh || fresh.id !== row.id) return;
    var kept = row.querySelector("[data-keep][id]");
    var next = kept && fresh.querySelector("#" + CSS.escape(kept.id));
    if (!next) return;
    Array.from(kept.attributes).forEach(function (a) {
      if (!next.hasAttribute(a.name)) kept.removeAttribute(a.name);
    });
    Array.from(next.attributes).forEach(function (a) { kept.setAttribute(a.name, a.value); });
    Array.from(row.childNodes).forEach(function (node) { if (node !== kept) node.remove(); });
    var before = true;
    Array.from(fresh.childNodes).forEach(function (node) {
      if (node === next) before = false;
      else if (before) row.insertBefore(node, kept);
      else row.appendChild(node);
    });
    event.detail.shouldSwap = false;
  }

  document.addEventListener("input", markPreviewStale);
  document.addEventListener("change", markPreviewStale);
  document.addEventListener("htmx:load", function (event) { showCopyButtons(event.target); });
  document.addEventListener("htmx:afterSettle", followErrorSlots);
  document.addEventListener("htmx:oobBeforeSwap", keepPressedControls);
  document.addEventListener("htmx:beforeRequest", function (event) {
    var form = previewForm(event);
    if (form) form.previewSent = previewState(form);
  });
  document.addEventListener("htmx:afterSettle", function () {
    document.querySelectorAll("form[data-preview]").forEach(function (form) {
      if (form.previewSent !== undefined && form.previewSent !== previewState(form)) {
        markFormStale(form);
      }
    });
  });

  document.addEventListener("DOMContentLoaded", function () {
    showCopyButtons(document);
    var switcher = document.getElementById("ws-switch");
    if (switcher) {
      switcher.addEventListener("change", function () {
        if (switcher.value) {
          window.location.href = "/w/" + encodeURIComponent(switcher.value) + "/";
        }
      });
    }
  });
})();
