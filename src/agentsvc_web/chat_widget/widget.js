// A published chat's widget: a chat bubble on the customer's page that opens the
// chat's hosted page in a frame. Served only to the chat's own sites; the frame's
// page may be framed by those sites only (its CSP frame-ancestors). No eval, no
// markup from strings: the two values below are JSON string literals.
(function () {
  "use strict";
  var PAGE_URL = __PAGE_URL__;
  var TITLE = __TITLE__;
  var script = document.currentScript;
  var base = script && script.src ? script.src : document.baseURI;
  var url = new URL(PAGE_URL, base);
  url.searchParams.set("embed", "1");
  // a private chat: the identity the customer's server signed, from the script's
  // data- attributes, handed to the page in the URL's fragment (never sent to a server)
  var data = script ? script.dataset : {};
  if (data.visitorId && data.expiresAt && data.signature) {
    var fragment = new URLSearchParams({ vid: data.visitorId, exp: data.expiresAt, sig: data.signature });
    url.hash = fragment.toString();
  }
  var open = false;
  var frame = null;
  var bubble = document.createElement("button");
  bubble.type = "button";
  bubble.id = "agentsvc-chat-bubble";
  bubble.setAttribute("aria-label", TITLE);
  bubble.setAttribute("aria-expanded", "false");
  bubble.textContent = "Chat";
  var b = bubble.style;
  b.position = "fixed";
  b.right = "20px";
  b.bottom = "20px";
  b.width = "56px";
  b.height = "56px";
  b.borderRadius = "50%";
  b.border = "none";
  b.background = "#2557d6";
  b.color = "#fff";
  b.fontSize = "14px";
  b.fontWeight = "600";
  b.fontFamily = "system-ui, sans-serif";
  b.cursor = "pointer";
  b.boxShadow = "0 4px 16px rgba(0,0,0,.25)";
  b.zIndex = "2147483647";

  function makeFrame() {
    var f = document.createElement("iframe");
    f.id = "agentsvc-chat-frame";
    f.title = TITLE;
    f.src = url.href;
    f.referrerPolicy = "strict-origin";
    f.setAttribute("sandbox", "allow-scripts allow-same-origin allow-forms allow-popups allow-popups-to-escape-sandbox");
    var s = f.style;
    s.position = "fixed";
    s.right = "20px";
    s.bottom = "88px";
    s.width = "min(380px, calc(100vw - 40px))";
    s.height = "min(560px, calc(100vh - 120px))";
    s.border = "1px solid #d0d5dd";
    s.borderRadius = "12px";
    s.background = "#fff";
    s.boxShadow = "0 8px 32px rgba(0,0,0,.25)";
    s.zIndex = "2147483647";
    return f;
  }

  bubble.addEventListener("click", function () {
    open = !open;
    bubble.setAttribute("aria-expanded", open ? "true" : "false");
    if (open) {
      if (!frame) {
        frame = makeFrame();
        document.body.appendChild(frame);
      }
      frame.style.display = "block";
    } else if (frame) {
      frame.style.display = "none";
    }
  });

  function mount() {
    document.body.appendChild(bubble);
  }
  if (document.body) mount();
  else document.addEventListener("DOMContentLoaded", mount);
})();
