package com.microsoft.CNTK;

import java.lang.ref.Cleaner;

/**
 * A loom_model or loom_value handle, freed exactly once: by its owner's close() (CNTK's
 * delete()), or by the Cleaner once the owner became unreachable without being closed. It
 * holds no reference to its owner, which would keep the owner reachable.
 */
final class NativeHandle implements Runnable {
  private static final Cleaner CLEANER = Cleaner.create();

  private final boolean model;
  private final String owner;
  private long address; // 0 once freed
  private final Cleaner.Cleanable cleanable;

  NativeHandle(Object owner, long address, boolean model) {
    this.model = model;
    this.owner = owner.getClass().getSimpleName();
    this.address = address;
    cleanable = CLEANER.register(owner, this);
  }

  /** The live handle; an exception naming the owner once it was closed. */
  synchronized long get() {
    if (address == 0)
      throw new IllegalStateException(
          "This " + owner + " was deleted (close() or delete()) and cannot be used again; "
              + (model ? "load the model again or use another clone" : "create it again"));
    return address;
  }

  synchronized boolean isLive() {
    return address != 0;
  }

  void close() {
    cleanable.clean(); // runs run() at most once
  }

  @Override
  public synchronized void run() {
    if (model) Native.freeModel(address);
    else Native.freeValue(address);
    address = 0;
  }
}
