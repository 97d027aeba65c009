import os
import threading

from data_prep.native_stderr import capture_native_stderr


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
