import os
import signal
import threading

from data_prep.runtime.native_stderr import capture_native_stderr


def test_text_written_to_fd_2_is_captured_and_kept_off_stderr(capfd):
    with capture_native_stderr() as text:
        os.write(2, b"TIFFFillStrip: Read error\n")
    assert text == ["TIFFFillStrip: Read error\n"]
    os.write(2, b"after\n")
    assert capfd.readouterr().err == "after\n"  # fd 2 is restored


def test_overlapping_captures_on_threads_restore_fd_2_once_all_close(capfd):
    entered, release = threading.Barrier(3), threading.Event()

    def capture():
        with capture_native_stderr():
            entered.wait()
            release.wait()
            os.write(2, b"inside\n")

    threads = [threading.Thread(target=capture) for _ in range(2)]
    for thread in threads:
        thread.start()
    entered.wait()
    release.set()
    for thread in threads:
        thread.join()
    os.write(2, b"after\n")
    assert capfd.readouterr().err == "after\n"


def test_nothing_written_captures_nothing():
    with capture_native_stderr() as text:
        pass
    assert text == []


def test_a_child_forked_inside_a_capture_starts_with_none_and_captures_its_own(capfd):
    """The ingest's pool forks its children while the parent may hold a capture open."""
    reader, writer = os.pipe()
    with capture_native_stderr() as parent_text:
        pid = os.fork()
        if pid == 0:  # the child: fd 2 restored, its own capture keeps its own text
            os.close(reader)
            signal.alarm(120)  # killed, so the test fails, if the capture hangs
            with capture_native_stderr() as text:
                os.write(2, b"child decoder\n")
            os.write(2, b"child after\n")
            os.write(writer, "".join(text).encode())
            os._exit(0)
        os.close(writer)
        with os.fdopen(reader) as pipe:
            child_text = pipe.read()
        os.waitpid(pid, 0)
        os.write(2, b"parent decoder\n")
    assert child_text == "child decoder\n"
    assert parent_text == ["parent decoder\n"]
    assert capfd.readouterr().err == "child after\n"
