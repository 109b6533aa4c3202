# cmake -DJNI=<libkvcjni.so> -DKVC=<libkvc.so.0> -DOUT=<dir> -P package_natives.cmake
# Copies the two libraries into the directory the jar carries them in (dev/kvc/native/<platform>/,
# see Native.java) with libkvcjni.so's RUNPATH set to $ORIGIN, as in the installed copy: the build
# tree's RUNPATH names this machine's build directory, which must not travel inside the jar.
file(MAKE_DIRECTORY ${OUT})
file(COPY_FILE ${JNI} ${OUT}/libkvcjni.so)
file(COPY_FILE ${KVC} ${OUT}/libkvc.so.0)
file(RPATH_SET FILE ${OUT}/libkvcjni.so NEW_RPATH "$ORIGIN")
