package io.tierlog.spark.read;

import java.io.FileNotFoundException;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;

/**
 * Reads a byte range of a local file with positional reads. Retention may rename a segment for
 * deletion (or delete it) between planning and reading, so the renamed paths are tried too and
 * a file that shrank or vanished gets the Python reader's messages, telling the user to rerun.
 */
final class FileSource {
    private FileSource() {}

    static byte[] read(String path, long start, long end, String[] alsoTry) throws IOException {
        String[] candidates = new String[alsoTry.length + 1];
        candidates[0] = path;
        System.arraycopy(alsoTry, 0, candidates, 1, alsoTry.length);
        for (String candidate : candidates) {
            FileChannel channel;
            try {
                channel = FileChannel.open(Path.of(candidate), StandardOpenOption.READ);
            } catch (NoSuchFileException e) {
                continue;
            }
            try (channel) {
                return readFully(channel, path, start, end);
            }
        }
        throw new FileNotFoundException(
                path + " was deleted since the query was planned (or is not reachable from this executor: "
                        + "local segments need the log dirs under the same path on every executor)");
    }

    private static byte[] readFully(FileChannel channel, String path, long start, long end) throws IOException {
        long size = channel.size();
        if (size < end) {
            throw truncated(path, size, end);
        }
        byte[] data = new byte[(int) (end - start)];
        ByteBuffer buffer = ByteBuffer.wrap(data);
        long position = start;
        while (buffer.hasRemaining()) {
            int n = channel.read(buffer, position);
            if (n < 0) {
                throw truncated(path, position, end);
            }
            position += n;
        }
        return data;
    }

    private static IOException truncated(String path, long size, long end) {
        return new IOException(
                path + " has " + size + " bytes, fewer than the " + end + " it had when the query was planned "
                        + "(truncated since); run the query again");
    }
}
