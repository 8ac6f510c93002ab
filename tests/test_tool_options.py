"""Options reach mkfs, mount, zpool/zfs, mdadm, cryptsetup and lvcreate only through the
allow-lists (model/options.py and the lists beside each tool): what a shared study file may not
do is refused when it is loaded, with file, line, field and why; nothing is attached for it."""

import shutil
from pathlib import Path

import pytest

from conftest import fslab, held_by, write_study
from fslab.core.errors import Refused
from fslab.devices.layers import LAYERS, Stack
from fslab.devices.loop import attached, image_file, on_loops
from fslab.filesystems import FILESYSTEMS
from fslab.model import Target
from fslab.model.options import OptionRefused, check_arguments, check_mount_options
from fslab.study import StudyError, builtin_studies, load_study, parse_study

HEAD = """\
[study]
name = "shared"
workloads = ["seq_write"]
image_size = "1GiB"

[fio]
size = "64MiB"

"""


def target(body: str, filesystem: str = "ext4") -> str:
    """A study with one target (its table begins on line 9)."""
    return HEAD + f'[[target]]\nfilesystem = "{filesystem}"\n{body}\n'


def error_of(text: str) -> str:
    with pytest.raises(StudyError) as info:
        parse_study(text, "study.toml", base_dir=Path("."))
    return str(info.value)


STACK = 'devices = 2\nlayers = ["md-raid1", "luks", "lvm"]\n'

# (filesystem, the target's fields, the message expected): one study file per class of harm.
HARMS = {
    "a positional device (btrfs member)": (
        "btrfs",
        'mkfs_options = "-d raid1 /dev/loop5"',
        "target[0].mkfs_options: /dev/loop5 is refused: a positional argument names a device",
    ),
    "xfs external log": (
        "xfs",
        'mkfs_options = "-l logdev=/dev/sdb"',
        "target[0].mkfs_options: mkfs.xfs -l logdev=/dev/sdb is refused: it names another device",
    ),
    "xfs realtime device": (
        "xfs",
        'mkfs_options = "-r rtdev=/dev/sdc"',
        "mkfs.xfs -r rtdev=/dev/sdc is refused: it names another device",
    ),
    "ext4 external journal": (
        "ext4",
        'mkfs_options = "-J device=/dev/sdb"',
        "mkfs.ext4 -J device=/dev/sdb is refused: it names another device",
    ),
    "ext4 files to copy in": (
        "ext4",
        'mkfs_options = "-d /etc"',
        "-d /etc is refused: it names a directory to copy in",
    ),
    "btrfs rootdir": ("btrfs", 'mkfs_options = "--rootdir=/root"', "--rootdir=/root is refused: it names a directory"),
    "an option fslab passes itself": ("xfs", 'mkfs_options = "-K"', "-K is refused: fslab passes it itself"),
    "an unknown mkfs option": (
        "xfs",
        'mkfs_options = "-z 3"',
        "unknown mkfs.xfs option '-z'; allowed: -b, -d, -i, -l, -m, -n, -r, -s",
    ),
    "a value of the wrong kind": ("ext4", 'mkfs_options = "-b 4097"', "-b 4097 is not one of 1024, 2048, 4096"),
    "an unknown suboption": (
        "xfs",
        'mkfs_options = "-d agcount=4,file=1"',
        "mkfs.xfs -d file=1 is refused: it makes the data section a regular file",
    ),
    "a value that is another option": (
        "ext4",
        'mkfs_options = "-m -F"',
        "-m -F starts with '-': a value is expected here, not another option",
    ),
    "a newline splits an argument": (
        "ext4",
        'mkfs_options = "-b 4096\\n/dev/sdb"',
        "/dev/sdb is refused: a positional argument",
    ),
    "a quoted newline in a value": (
        "ext4",
        "mkfs_options = \"-E 'stride=16\\n'\"",
        r"mkfs.ext4 -E 'stride=16\n' holds a control character",
    ),
    "an unclosed quote": (
        "ext4",
        'mkfs_options = "-E \'stride=16"',
        "-E 'stride=16 cannot be split into arguments: no closing quotation (an unclosed quote?)",
    ),
    "xfs mount: external log": (
        "xfs",
        'mount_options = "noatime,logdev=/dev/sdb"',
        "target[0].mount_options: xfs mount option logdev=/dev/sdb is refused: it names another device",
    ),
    "xfs mount: realtime device": (
        "xfs",
        'mount_options = "rtdev=/dev/sdc"',
        "xfs mount option rtdev=/dev/sdc is refused: it names another device",
    ),
    "btrfs mount: another member": (
        "btrfs",
        'mount_options = "device=/dev/sdb"',
        "btrfs mount option device=/dev/sdb is refused: it names another device",
    ),
    "btrfs mount: a subvolume path": (
        "btrfs",
        'mount_options = "subvol=/home"',
        "btrfs mount option subvol=/home is refused: it names a path",
    ),
    "ext4 mount: a journal file": (
        "ext4",
        'mount_options = "journal_path=/tmp/j"',
        "ext4 mount option journal_path=/tmp/j is refused: it names a file",
    ),
    "ext4 mount: a quota file": (
        "ext4",
        'mount_options = "usrjquota=aquota.user,jqfmt=vfsv0"',
        "ext4 mount option usrjquota=aquota.user is refused: it names a quota file",
    ),
    "ext4 mount: a panic": (
        "ext4",
        'mount_options = "errors=panic"',
        "ext4 mount option errors=panic is refused: an error would panic the host",
    ),
    "a read-only mount": (
        "ext4",
        'mount_options = "ro,noatime"',
        "ext4 mount option ro is refused: a read-only mount fails every write workload",
    ),
    "a loop mount": (
        "ext4",
        'mount_options = "loop=/dev/loop7"',
        "ext4 mount option loop=/dev/loop7 is refused: it attaches a file of its own",
    ),
    "a bad mount value": (
        "ext4",
        'mount_options = "data=bogus"',
        "ext4 mount option data=bogus is not one of journal, ordered, writeback",
    ),
    "an unknown mount option": (
        "xfs",
        'mount_options = "nobarrier"',
        "xfs mount option nobarrier is refused: XFS dropped it in Linux 4.19",
    ),
    "a newline in mount options": (
        "ext4",
        'mount_options = "noatime\\n,data=writeback"',
        r"ext4 mount option 'noatime\n,data=writeback' holds a control character",
    ),
    "zpool altroot": (
        "zfs",
        'pool_options = { altroot = "/mnt" }',
        "target[0].pool_options: zpool property altroot=/mnt is refused: it names a path",
    ),
    "zpool cachefile": (
        "zfs",
        'pool_options = { cachefile = "/etc/zfs/zpool.cache" }',
        "zpool property cachefile=/etc/zfs/zpool.cache is refused: it names a path",
    ),
    "zpool failmode panic": (
        "zfs",
        'pool_options = { failmode = "panic" }',
        "zpool property failmode=panic is refused: an I/O failure would panic the host",
    ),
    "zfs mountpoint": (
        "zfs",
        'properties = { mountpoint = "/etc" }',
        "target[0].properties: zfs property mountpoint=/etc is refused: it names a path",
    ),
    "zfs sharenfs": (
        "zfs",
        'properties = { sharenfs = "rw=@0.0.0.0/0" }',
        "zfs property sharenfs=rw=@0.0.0.0/0 is refused: it shares the dataset over NFS",
    ),
    "zfs keylocation": (
        "zfs",
        'properties = { keylocation = "file:///root/key" }',
        "zfs property keylocation=file:///root/key is refused: it names a file or URL",
    ),
    "zfs passphrase key": (
        "zfs",
        'properties = { encryption = "aes-256-gcm", keyformat = "passphrase" }',
        "zfs property keyformat=passphrase is refused: fslab generates each encrypted dataset's key itself",
    ),
    "zfs hex key": (
        "zfs",
        'properties = { encryption = "on", keyformat = "hex" }',
        "zfs property keyformat=hex is refused: fslab generates each encrypted dataset's key itself",
    ),
    "zfs keyformat alone": ("zfs", 'properties = { keyformat = "raw" }', "keyformat goes with encryption"),
    "zfs keyformat on an unencrypted sweep value": (
        "zfs",
        'properties = { encryption = ["off", "on"], keyformat = "raw" }',
        "keyformat goes with encryption",
    ),
    "zfs pbkdf2iters": (
        "zfs",
        'properties = { encryption = "on", pbkdf2iters = "350000" }',
        "zfs property pbkdf2iters=350000 is refused: it derives a key from a passphrase",
    ),
    "zfs canmount": (
        "zfs",
        'properties = { canmount = "noauto" }',
        "zfs property canmount=noauto is refused: fslab mounts the dataset itself",
    ),
    "a bad zfs value": (
        "zfs",
        'properties = { recordsize = ["128k", "3k"] }',
        "zfs property recordsize=3k is not a power of two from 512 to 16777216",
    ),
    "an unknown zfs property": (
        "zfs",
        'properties = { "com.example:x" = "1" }',
        "unknown zfs property 'com.example:x'",
    ),
    "luks detached header": (
        "ext4",
        STACK + 'layer_options = { luks = "--header /root/h" }',
        "target[0].layer_options: luks: --header /root/h is refused: it names a file",
    ),
    "luks key file": (
        "ext4",
        STACK + 'layer_options = { luks = "--key-file=/root/k" }',
        "luks: --key-file=/root/k is refused: fslab makes a random key",
    ),
    "luks slow key derivation": (
        "ext4",
        STACK + 'layer_options = { luks = "--pbkdf argon2id" }',
        "luks: --pbkdf argon2id is refused: fslab sets a fast key derivation",
    ),
    "md bitmap file": (
        "ext4",
        STACK + 'layer_options = { md-raid1 = "--bitmap=/tmp/bitmap" }',
        "md-raid1: --bitmap /tmp/bitmap holds '/': options name no path and no device",
    ),
    "md write journal": (
        "ext4",
        STACK + 'layer_options = { md-raid1 = "--write-journal /dev/sdb" }',
        "md-raid1: --write-journal /dev/sdb is refused: it names another device",
    ),
    "lvm configuration": (
        "ext4",
        STACK + 'layer_options = { lvm = "--config \'devices { filter = [ \\"a|.*|\\" ] }\'" }',
        "lvm: --config devices { filter",
    ),
    "lvm profile": (
        "ext4",
        STACK + 'layer_options = { lvm = "--profile x" }',
        "lvm: --profile x is refused: it names a profile file",
    ),
}


@pytest.mark.parametrize("harm", list(HARMS))
def test_each_class_of_harm_is_refused_at_load_with_line_field_and_why(harm):
    filesystem, body, expected = HARMS[harm]
    message = error_of(target(body, filesystem))
    assert message.startswith("study.toml:") and expected in message, message


def test_the_line_is_the_fields_own():
    message = error_of(target('mount_options = "noatime"\nmkfs_options = "-l logdev=/dev/sdb"', "xfs"))
    assert (
        message == "study.toml:12: target[0].mkfs_options: mkfs.xfs -l logdev=/dev/sdb "
        "is refused: it names another device: an external log"
    )


def test_every_problem_of_every_target_is_listed_together():
    text = (
        target(
            'mkfs_options = "-l logdev=/dev/sdb -z 3"\nmount_options = ["noatime", "rtdev=/dev/sdc", "nobarrier"]',
            "xfs",
        )
        + '\n[[target]]\nname = "z"\nfilesystem = "zfs"\npool_options = { altroot '
        '= "/mnt" }\nproperties = { mountpoint = "/x", sharesmb = "on" }\n'
        + '\n[[target]]\nname = "b"\nfilesystem = "btrfs"\nmount_options = "device=/dev/sdb"\n'
    )
    lines = error_of(text).splitlines()
    assert [line.split(": ")[1] for line in lines] == [
        "target[0].mkfs_options",
        "target[0].mount_options",
        "target[1].pool_options",
        "target[1].properties",
        "target[2].mount_options",
    ]
    assert "logdev=/dev/sdb is refused" in lines[0] and "unknown mkfs.xfs option '-z'" in lines[0]
    assert "rtdev=/dev/sdc is refused" in lines[1] and "nobarrier is refused" in lines[1]
    assert "mountpoint=/x is refused" in lines[3] and "sharesmb=on is refused" in lines[3]


def test_a_sweep_over_filesystems_checks_each_ones_list():
    message = error_of(HEAD + '[[target]]\nfilesystem = ["ext4", "xfs"]\nmkfs_options = "-b 4096"\n')
    assert "unknown mkfs.xfs -b suboption '4096'; allowed: size" in message


def test_options_of_another_kind_of_target_are_refused():
    assert "zfs targets take no mkfs_options" in error_of(target('mkfs_options = "-b 4096"', "zfs"))
    assert "raw targets take no mount_options" in error_of(target('mount_options = "noatime"', "raw"))
    assert "unknown layer 'dm-crypt'" in error_of(target(STACK + 'layer_options = { dm-crypt = "--cipher x" }'))


ACCEPTED = [
    (
        "ext4",
        'mkfs_options = "-b 4096 -E stride=16,lazy_itable_init -O ^has_journal,metadata_csum -e remount-ro"\n'
        'mount_options = ["defaults", "noatime,data=writeback", "barrier=0", "nobarrier,commit=60"]',
    ),
    (
        "xfs",
        'mkfs_options = "-b size=4096 -d su=64k,sw=2 -m reflink=1 -l '
        'size=64m"\nmount_options = "noatime,logbsize=256k,allocsize=64k"',
    ),
    (
        "btrfs",
        'mkfs_options = ["-m single", "-d raid0 -m raid1", "--data=single --checksum xxhash '
        '-O no-holes,^extref"]\ndevices = 2\nmount_options = ["nodatasum", "nodatacow", '
        '"compress=zstd", "compress=zstd:3,discard=async", "autodefrag,datacow,discard"]',
    ),
    (
        "zfs",
        'pool_options = { ashift = 12, autoexpand = false, failmode = "continue" }\nproperties = '
        '{ recordsize = ["4k", "128k", "1M"], atime = false, compression = ["lz4", "zstd-3", '
        '"gzip-9", "off"], sync = "disabled", dedup = "sha256,verify", primarycache = "metadata" }',
    ),
    ("zfs", 'properties = { encryption = ["off", "on", "aes-256-gcm", "aes-128-ccm"], compression = "lz4" }'),
    ("zfs", 'properties = { encryption = "aes-256-gcm", keyformat = "raw" }'),
    (
        "ext4",
        STACK + 'layer_options = { luks = "--cipher aes-xts-plain64 --key-size 256 --sector-size 4096", '
        'md-raid1 = "--bitmap=internal --bitmap-chunk 64M", lvm = "--readahead auto --zero n" }',
    ),
]


@pytest.mark.parametrize(("filesystem", "body"), ACCEPTED, ids=[f"{fs}-{i}" for i, (fs, _) in enumerate(ACCEPTED)])
def test_what_a_study_may_ask_for_is_accepted(filesystem, body):
    assert parse_study(target(body, filesystem), "study.toml", base_dir=Path(".")).targets


def test_every_builtin_study_loads():
    for name in builtin_studies():
        assert load_study(name).targets, name


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            'filesystem = "xfs"\nimage_size = "256MiB"',
            "study.toml:11: target[0].image_size: 256MiB is too small "
            "for target 'xfs' (xfs): below 300MiB per device: mkfs.xfs",
        ),
        (
            'filesystem = "btrfs"\nimage_size = "100MiB"',
            "target[0].image_size: 100MiB is too small for target 'btrfs' (btrfs): below 109MiB per device",
        ),
        (
            'filesystem = "btrfs"\ndevices = 2\nmkfs_options = "-d raid1"\nimage_size = "120MiB"',
            "120MiB is too small for target 'btrfs' (btrfs): below 125MiB per device",
        ),
        (
            'filesystem = "btrfs"\nmkfs_options = "--data=dup"\nimage_size = "200MiB"',
            "200MiB is too small for target 'btrfs' (btrfs): below 229MiB per device",
        ),
        (
            'filesystem = "zfs"\ndevices = 2\nimage_size = "32MiB"',
            "32MiB is too small for target 'zfs' (zfs): below 64MiB per device: zpool create refuses",
        ),
        (
            'filesystem = "ext4"\nimage_size = "64KiB"',
            "64KiB is too small for target 'ext4' (ext4): below 104KiB per device",
        ),
    ],
)
def test_an_image_too_small_for_its_mkfs_is_refused_at_its_line(body, expected):
    text = HEAD.replace('size = "64MiB"', 'size = "1MiB"') + "[[target]]\n" + body + "\n"
    assert expected in error_of(text)


def test_the_studys_image_size_and_scale_count_for_the_floor():
    small = HEAD.replace('image_size = "1GiB"', 'image_size = "256MiB"').replace('size = "64MiB"', 'size = "1MiB"')
    message = error_of(small + '[[target]]\nfilesystem = "xfs"\n')
    # Written in [study], inherited by the target: refused at [study]'s line, naming the target.
    assert message.startswith(
        "study.toml:4: study.image_size: 256MiB is too small for target 'xfs' (xfs, target[0], line 9): below 300MiB"
    )
    with pytest.raises(
        StudyError,
        match=r"^study.toml:4: study.image_size: 1GiB × --scale 0.25 "
        r"= 256MiB is too small for target 'xfs' .*below 300MiB",
    ):
        parse_study(
            HEAD.replace('size = "64MiB"', 'size = "1MiB"') + '[[target]]\nfilesystem = "xfs"\n',
            "study.toml",
            base_dir=Path("."),
            scale=0.25,
        )


def test_the_checks_are_pure_and_their_refusal_is_a_guard_refusal():
    xfs = FILESYSTEMS["xfs"].accepted_mkfs_options
    assert check_arguments(xfs, "-d agcount=8 -m crc=1") == ["-d", "agcount=8", "-m", "crc=1"]
    with pytest.raises(OptionRefused) as info:
        check_arguments(LAYERS["md-raid1"].options, ["--bitmap", "internal", "--chunk=512"])
    assert isinstance(info.value, Refused) and isinstance(info.value, ValueError)
    assert str(info.value) == "--chunk=512 is refused: RAID1 has no chunks: mdadm refuses it at level 1"
    assert check_mount_options(FILESYSTEMS["btrfs"].accepted_mount_options, "btrfs", "") == ""
    with pytest.raises(OptionRefused, match="btrfs mount option list has an empty item"):
        check_mount_options(FILESYSTEMS["btrfs"].accepted_mount_options, "btrfs", "noatime,,compress")


def test_the_commands_check_again_where_they_are_built():
    with pytest.raises(OptionRefused, match="/dev/sdb is refused"):
        FILESYSTEMS["btrfs"].mkfs_command(["/dev/loop9"], ["-d", "raid1", "/dev/sdb"])
    zfs_target = Target("z", "zfs", (), "", 2**30, "sparse", properties={"mountpoint": "/etc"})
    with pytest.raises(OptionRefused, match="mountpoint=/etc is refused"):
        FILESYSTEMS["zfs"].dataset_command("pool", Path("/x"), zfs_target)


def test_an_encrypted_dataset_is_made_with_a_raw_key_on_zfss_standard_input():
    """keyformat=raw is added, and no keylocation: zfs reads the key fslab generates on stdin."""
    encrypted = Target(
        "z", "zfs", (), "", 2**30, "sparse", properties={"encryption": "aes-256-gcm", "compression": "lz4"}
    )
    command = FILESYSTEMS["zfs"].dataset_command("pool", Path("/x"), encrypted)
    assert command == [
        "zfs",
        "create",
        "-o",
        "encryption=aes-256-gcm",
        "-o",
        "compression=lz4",
        "-o",
        "keyformat=raw",
        "-o",
        "mountpoint=/x",
        "pool/data",
    ]
    plain = Target("z", "zfs", (), "", 2**30, "sparse", properties={"encryption": "off"})
    assert "keyformat=raw" not in FILESYSTEMS["zfs"].dataset_command("pool", Path("/x"), plain)


def test_ext4s_own_extended_options_survive_the_studys():
    command = FILESYSTEMS["ext4"].mkfs_command(["/dev/loop9"], ["-b", "4096", "-E", "stride=16"])
    assert command == [
        "mkfs.ext4",
        "-F",
        "-q",
        "-E",
        "lazy_itable_init=0,lazy_journal_init=0,nodiscard,stride=16",
        "-b",
        "4096",
        "/dev/loop9",
    ]


@pytest.mark.parametrize(
    "body",
    [
        ('[[target]]\nfilesystem = "btrfs"\ndevices = 2\nmkfs_options = "-d raid1 -m raid1 /dev/loop5"\n'),
        ('[[target]]\nfilesystem = "xfs"\nmkfs_options = "-l \'logdev=/dev/sdb"\n'),
    ],
    ids=["device", "unclosed-quote"],
)
@pytest.mark.slow
def test_a_refused_study_attaches_nothing(workdir, tmp_path, body):
    study = write_study(tmp_path, HEAD + '[[target]]\nname = "fine"\nfilesystem = "ext4"\n\n' + body)
    result = fslab("run", str(study), "--no-ceiling", "--db", str(tmp_path / "r.db"), "--workdir", str(workdir.root))
    assert result.returncode == 2, result.stdout + result.stderr
    assert (
        "study.toml:" in result.stderr
        and "target[1].mkfs_options" in result.stderr
        and "Traceback" not in result.stderr
    )
    assert held_by(workdir.root) == []
    assert not list(workdir.root.rglob("*.img")), "no image was made"


# Accepted options, many at once, that the kernel must really mount: an allow-list that lets
# through what the kernel refuses would fail here, not in somebody's study.
MOUNTABLE = {
    "ext4": (
        "-b 4096 -E stride=16,stripe_width=32 -O fast_commit,^huge_file -I 256 -i 16384 -m 1 -J size=16 -e remount-ro",
        "noatime,nodiratime,lazytime,data=writeback,commit=30,barrier=0,journal_checksum,journal_async_commit,delalloc,"
        "dioread_nolock,inode_readahead_blks=64,stripe=16,max_batch_time=15000,min_batch_time=0,journal_ioprio=3,nodiscard,"
        "errors=remount-ro,data_err=abort,auto_da_alloc=0,block_validity,init_itable=5,max_dir_size_kb=1024,nombcache,"
        "mb_optimize_scan=1,no_prefetch_block_bitmaps,acl,user_xattr,nodev,nosuid,noexec,dirsync",
    ),
    "xfs": (
        "-b size=4096 -d agcount=4,su=64k,sw=2 -i size=512,sparse=1 -l size=64m,lazy-count=1 "
        "-m crc=1,finobt=1,reflink=1,bigtime=1 -n size=8192,ftype=1 -s size=4096",
        "noatime,largeio,inode64,allocsize=64k,logbufs=8,logbsize=256k,swalloc,filestreams,sunit=128,swidth=256,nodiscard,wsync,nouuid,grpid",
    ),
    "btrfs": (
        "-m single -d single --csum xxhash -n 16k -O no-holes -R free-space-tree",
        "noatime,compress=zstd:3,autodefrag,space_cache=v2,ssd,commit=60,discard=async,max_inline=2048,metadata_ratio=2,"
        "thread_pool=4,flushoncommit,notreelog,acl,datasum,datacow,subvolid=5",
    ),
}


@pytest.mark.root
@pytest.mark.parametrize("kind", list(MOUNTABLE))
def test_accepted_options_really_make_and_mount_the_filesystem(workdir, kind):
    mkfs, mount = MOUNTABLE[kind]
    filesystem = FILESYSTEMS[kind]
    options = filesystem.check_mkfs_options(mkfs)
    filesystem.check_mount_options(mount)
    size = 512 * 2**20
    target_ = Target("opts", kind, tuple(options), mount, size, "sparse")
    with (
        image_file(workdir.journal, workdir.images, "opts", size, fill=None) as image,
        attached(workdir.journal, image) as loop,
    ):
        with filesystem.provision(
            workdir.journal, Stack.on(on_loops([loop])), workdir.mounts / "opts", target_
        ) as ready:
            assert ready.mount_options_effective and "noatime" in ready.mount_options_effective.split(",")
    assert workdir.journal.outstanding() == []


ROOT = Path(__file__).parent.parent


@pytest.mark.parametrize("document", ["docs/study-format.md", "README.md"])
def test_the_study_files_in_the_docs_load(document, tmp_path):
    (tmp_path / "jobs").mkdir()
    (tmp_path / "jobs" / "my.fio").write_text("[my]\nrw=randread\nbs=4k\nsize=16m\n")
    shutil.copytree(
        ROOT / "tests" / "fixtures" / "fio-examples", tmp_path / "examples"
    )  # fio's own, as "Running fio's own examples" has them
    text = (ROOT / document).read_text()
    examples = [block.split("```", 1)[0] for block in text.split("```toml\n")[1:]]
    studies = [example for example in examples if example.lstrip().startswith(("[study]", "#"))]
    assert studies
    for example in studies:
        assert parse_study(example, document, base_dir=tmp_path).targets


def test_a_c1_control_character_is_refused_in_a_value_and_escaped_when_shown():
    from fslab.core.names import visible
    from fslab.model.options import plain_value_problem

    assert plain_value_problem("a\x9b2J") == "holds a control character (a newline?)"
    assert plain_value_problem("a\nb") == "holds a control character (a newline?)"
    assert visible("a\x9b2J\x1b[0m\tb\n") == "a\\x9b2J\\x1b[0m\tb\n"


def test_a_pool_is_synced_with_zpools_own_failmode_only(monkeypatch):
    """zfs-fuse's pools are synced by setting failmode to the value zpool reports: a value that
    is not a failmode (a zpool or daemon gone wrong) is never passed on to `zpool set`."""
    import subprocess

    from fslab.filesystems import zfs

    ran: list[list[str]] = []

    def answers(failmode: str):
        def run(argv, **_):
            ran.append(list(argv))
            return subprocess.CompletedProcess(
                argv, 0, f"NAME  PROPERTY  VALUE  SOURCE\npool  failmode  {failmode}  default\n", ""
            )

        return run

    monkeypatch.setattr(zfs, "runs_on_fuse", lambda: True)
    monkeypatch.setattr(zfs, "run", answers("wait"))
    zfs.sync_pool("pool")
    assert ran[-1] == ["zpool", "set", "failmode=wait", "pool"]
    ran.clear()
    monkeypatch.setattr(zfs, "run", answers("altroot=/etc"))
    with pytest.raises(Refused, match="not a failmode"):
        zfs.sync_pool("pool")
    assert all(argv[:2] == ["zpool", "get"] for argv in ran)
