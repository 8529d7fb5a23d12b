// A program that uses fusejit only through consumer_plugin, a shared library.
extern "C" int run_fusejit_in_a_shared_library();

int main() { return run_fusejit_in_a_shared_library(); }
