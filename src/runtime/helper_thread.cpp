#include "runtime/helper_thread.h"

#include <utility>

#include "base/check.h"

namespace dsv4::runtime {

HelperThread::HelperThread() : thread_([this] { work(); }) {}

HelperThread::~HelperThread() {
  {
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [this] { return !task_; });
    stopping_ = true;
  }
  wake_.notify_one();
  thread_.join();
}

void HelperThread::start(std::function<void()> task) {
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    DSV4_CHECK(!task_, "a helper task started before the last one was waited for");
    task_ = std::move(task);
  }
  wake_.notify_one();
}

void HelperThread::wait() {
  std::unique_lock<std::mutex> lock(mutex_);
  done_.wait(lock, [this] { return !task_; });
  if (thrown_) std::rethrow_exception(std::exchange(thrown_, nullptr));
}

void HelperThread::work() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    wake_.wait(lock, [this] { return stopping_ || task_; });
    if (!task_) return;  // stopping, nothing left
    lock.unlock();
    std::exception_ptr thrown;
    try {
      task_();
    } catch (...) {
      thrown = std::current_exception();
    }
    lock.lock();
    thrown_ = thrown;
    task_ = nullptr;
    done_.notify_all();
  }
}

}  // namespace dsv4::runtime
