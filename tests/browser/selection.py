"""Selecting text with the real mouse: find where a phrase is drawn, then drag."""


def drag_select(page, container_selector: str, phrase: str) -> None:
    """Press the mouse just inside the phrase's first character and release it just
    inside its last one, as a person would."""
    page.wait_for_load_state("load")
    box = page.evaluate(
        """([selector, phrase]) => {
            const root = document.querySelector(selector);
            const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
            let full = "", nodes = [], n;
            while ((n = walker.nextNode())) { nodes.push([n, full.length]); full += n.data; }
            const at = full.indexOf(phrase);
            if (at < 0) return null;
            function point(offset) {
                for (const [node, start] of nodes) {
                    if (offset < start + node.data.length) return [node, offset - start];
                }
                return null;
            }
            const [sn, so] = point(at);
            const [en, eo] = point(at + phrase.length - 1);
            const r1 = document.createRange(); r1.setStart(sn, so); r1.setEnd(sn, so + 1);
            const r2 = document.createRange(); r2.setStart(en, eo); r2.setEnd(en, eo + 1);
            r1.startContainer.parentElement.scrollIntoView({block: "center"});
            const a = r1.getBoundingClientRect(), b = r2.getBoundingClientRect();
            return {x1: a.left + 1, y1: a.top + a.height / 2, x2: b.right - 1, y2: b.top + b.height / 2};
        }""",
        [container_selector, phrase],
    )
    assert box is not None, f"{phrase!r} is not shown in {container_selector}"
    page.mouse.move(box["x1"], box["y1"])
    page.mouse.down()
    page.mouse.move((box["x1"] + box["x2"]) / 2, (box["y1"] + box["y2"]) / 2, steps=4)
    page.mouse.move(box["x2"], box["y2"], steps=4)
    page.mouse.up()
    selected = page.evaluate("window.getSelection().toString()")
    assert selected == phrase, (selected, phrase)
