// Copying text to the clipboard. navigator.clipboard exists in secure contexts
// only (HTTPS or localhost); elsewhere a hidden textarea and execCommand("copy")
// do it. The answer says whether the browser took it.

export async function copyText(value) {
  try {
    if (navigator.clipboard?.writeText) {
      await navigator.clipboard.writeText(value);
      return true;
    }
  } catch {
    // refused (no permission, no focus): the fallback below may still work
  }
  const area = document.createElement("textarea");
  area.value = value;
  area.setAttribute("readonly", "");
  area.className = "offscreen";
  document.body.append(area);
  area.select();
  let ok = false;
  try {
    ok = document.execCommand("copy");
  } catch {
    ok = false;
  }
  area.remove();
  return ok;
}
