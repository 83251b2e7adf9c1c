"""Import and export of memory stores: the archive format, and imports of plain files. Only
reading, writing and walking: every rule is the store's (:class:`memfs.store.Store`'s
``archive`` part), which the API, the Console and the CLI call through this package.

Its modules, each importing only those before it in this list (tests/unit/test_layers.py):

- :mod:`~memfs.transfer.progress`: how an import or an export reports its progress;
- :mod:`~memfs.transfer.archive`: the archive format (``docs/EXPORT-FORMAT.md``), both ways:
  a store exported as one snapshot, an archive read, checked whole and restored;
- :mod:`~memfs.transfer.files`: plain files (a directory, or a zip of one) walked and
  imported;
- :mod:`~memfs.transfer.upload`: what an upload or a path is, an archive or a zip, and its
  import;
- :mod:`~memfs.transfer.response`: the HTTP response that streams an export and closes it
  however the download ends;
- this module: the names callers use (``from memfs import transfer``, then
  ``transfer.export_archive(...)``). A constant is read where it is defined: a test patches
  ``memfs.transfer.files.MAX_ZIP_ENTRIES``, not this module's copy.
"""

from .archive import (
    FORMAT,
    READABLE_VERSIONS,
    VERSION,
    ArchiveReader,
    export_archive,
    export_lines,
    import_archive,
    write_archive,
)
from .files import MAX_ZIP_ENTRIES, Entry, import_files, walk_directory, walk_zip
from .progress import Progress
from .response import ClosingStreamingResponse
from .upload import GZIP_MAGIC, ZIP_MAGICS, import_upload, sniff

__all__ = [
    "FORMAT", "GZIP_MAGIC", "MAX_ZIP_ENTRIES", "READABLE_VERSIONS", "VERSION", "ZIP_MAGICS",
    "ArchiveReader", "ClosingStreamingResponse", "Entry", "Progress", "export_archive",
    "export_lines", "import_archive", "import_files", "import_upload", "sniff",
    "walk_directory", "walk_zip", "write_archive",
]
