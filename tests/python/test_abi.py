"""The ctypes structures of goldminer/_abi.py have gcc's layout of loader.h/aug.h,
bind.h and jitter.h; none is left out."""
import ctypes
import os

from helpers import REPO, GmTest, abi_layout

from goldminer import _abi


class TestAbi(GmTest):
    needs = ("cc",)

    def test_struct_layouts_match_the_header(self):
        c = abi_layout()
        for cname, cls in _abi.ABI_STRUCTS + _abi.OTHER_STRUCTS:
            self.assertIn(cname, c)
            self.assertEqual(c[cname]["sizeof"], ctypes.sizeof(cls),
                             "sizeof(struct %s)" % cname)
            fields = [f for f, _ in cls._fields_]
            self.assertEqual(sorted(fields), sorted(k for k in c[cname] if k != "sizeof"),
                             "fields of struct %s" % cname)
            for f in fields:
                self.assertEqual(c[cname][f], getattr(cls, f).offset,
                                 "offsetof(struct %s, %s)" % (cname, f))

    def test_every_structure_of_the_binding_is_checked(self):
        checked = {cls for _, cls in _abi.ABI_STRUCTS + _abi.OTHER_STRUCTS}
        every = {v for v in vars(_abi).values()
                 if isinstance(v, type) and issubclass(v, ctypes.Structure)}
        self.assertEqual({c.__name__ for c in every - checked}, set())

    def test_constants_match_the_header(self):
        # The C reference prints GM_CHECKSUM_INIT-seeded hashes; the enums are fixed.
        with open(os.path.join(REPO, "include", "goldminer", "loader.h")) as f:
            src = f.read()
        self.assertIn("#define GM_LOADER_END_OF_EPOCH %d" % _abi.GM_LOADER_END_OF_EPOCH, src)
        self.assertIn("#define GM_LOADER_END %d" % _abi.GM_LOADER_END, src)
        with open(os.path.join(REPO, "include", "goldminer", "checksum.h")) as f:
            self.assertIn("0x%x" % _abi.FNV_OFFSET, f.read().lower())
