"""gyre-sim --plot's SVG: parses as XML, and holds one polyline per series.

check_plot.py FILE SERIES [NAME...]: SERIES polylines, each with points and
named by its <title>, the legend naming the same; every NAME among them.
"""
import sys
import xml.etree.ElementTree as ET

SVG = "{http://www.w3.org/2000/svg}"


def main():
    path, want, names = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    root = ET.parse(path).getroot()
    assert root.tag == SVG + "svg", root.tag
    lines = root.findall(SVG + "polyline")
    series = [l.find(SVG + "title").text for l in lines]
    assert len(lines) == want, f"{len(lines)} polylines ({series}), expected {want}"
    for l in lines:
        assert len(l.get("points").split()) >= 1, l.get("points")
    texts = [t.text for t in root.iter(SVG + "text")]
    for name in series + names:
        assert name in texts, f"{name!r} not in the legend: {texts}"
    for name in names:
        assert name in series, f"no line for {name!r}: {series}"
    assert any("allreduce" in t for t in texts), "no title naming the collective"
    assert "busbw (GB/s)" in texts and "8" in texts and "8K" in texts, texts
    print(len(lines), "series:", ", ".join(series))


main()
