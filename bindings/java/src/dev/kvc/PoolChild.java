package dev.kvc;

import java.util.concurrent.locks.Lock;
import java.util.concurrent.locks.ReentrantReadWriteLock;
import java.util.function.LongConsumer;
import java.util.function.LongFunction;

/**
 * A C object that belongs to a pool (a {@link Batch}, an {@link XferAgent}): its handle under its
 * own lock, registered with the pool's state so that closing the pool destroys it first (a C batch
 * or agent must not outlive its pool). The handle is only touched under the pool's lock too.
 */
final class PoolChild {
    final ReentrantReadWriteLock lock = new ReentrantReadWriteLock();
    long handle;
    private final LongConsumer destroyHandle;

    /** Registers the new child with pool; destroyHandle is its kvc_*_destroy. */
    PoolChild(Pool.State pool, long handle, LongConsumer destroyHandle) {
        this.handle = handle;
        this.destroyHandle = destroyHandle;
        synchronized (pool.children) {
            pool.children.add(this);
        }
    }

    /**
     * Runs f with the open child's handle under its read lock (write: its write lock); STATE when
     * it was closed. Callers hold the pool's lock (Pool.with) around it.
     */
    <T> T with(String op, boolean write, LongFunction<T> f) {
        Lock l = write ? lock.writeLock() : lock.readLock();
        l.lock();
        try {
            if (handle == 0) {
                throw KvcException.closed(op);
            }
            return f.apply(handle);
        } finally {
            l.unlock();
        }
    }

    /** Destroys the C object once; later calls do nothing. */
    void destroy() {
        lock.writeLock().lock();
        try {
            if (handle != 0) {
                destroyHandle.accept(handle);
                handle = 0;
            }
        } finally {
            lock.writeLock().unlock();
        }
    }

    /**
     * The Cleaner's action for the child's Java object: it references the pool's state and the
     * child, never the Pool or the object itself. A no-op once the pool's close destroyed it.
     */
    static Runnable closer(Pool.State pool, PoolChild child) {
        return () -> {
            pool.lock.readLock().lock();
            try {
                if (pool.handle == 0) {
                    return;
                }
                child.destroy();
                synchronized (pool.children) {
                    pool.children.remove(child);
                }
            } finally {
                pool.lock.readLock().unlock();
            }
        };
    }
}
