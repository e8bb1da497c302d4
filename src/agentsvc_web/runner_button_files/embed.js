/* agentsvc runner button: mounts the run form in an iframe
   (agentsvc_web/runner_button.py fills in the frame's URL and title below) */
(function () {
  "use strict";
  var script = document.currentScript;
  var url;
  try {
    url = script && script.src ? new URL(__BUTTON_URL__, script.src) : new URL(__BUTTON_URL__);
  } catch (error) {
    return;
  }
  var frame = document.createElement("iframe");
  frame.src = url.href;
  frame.title = __TITLE__;
  frame.referrerPolicy = "strict-origin";
  frame.setAttribute("sandbox", "allow-scripts allow-forms allow-same-origin");
  frame.style.border = "0";
  frame.style.display = "block";
  frame.style.width = "100%";
  frame.style.maxWidth = "560px";
  frame.style.height = "420px";
  var host = document.querySelector("[data-agentsvc-runner]:not([data-agentsvc-mounted])");
  if (host) {
    host.setAttribute("data-agentsvc-mounted", "");
    host.appendChild(frame);
  } else if (script && script.parentNode && script.parentNode !== document.head) {
    script.parentNode.insertBefore(frame, script.nextSibling);
  } else if (document.body) {
    document.body.appendChild(frame);  // a script in the head (a tag manager's): the page's end
  } else {
    return;
  }
  window.addEventListener("message", function (event) {
    var data = event.data;
    if (event.source !== frame.contentWindow || event.origin !== url.origin) return;
    if (!data || data.type !== "agentsvc-runner-height" || typeof data.height !== "number") return;
    if (!isFinite(data.height)) return;
    frame.style.height = Math.min(Math.max(Math.ceil(data.height), 80), 4000) + "px";
  });
})();
